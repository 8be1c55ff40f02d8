// disable() keeps a collection's processors: a processor running through
// disable() halts (collection not enabled) without losing its checkpoints;
// after enable() it resumes from them, and the writes of the disabled gap are
// reported as history lost, never skipped: halted with the runbook, or, with
// `resync`, re-read from the table.  disable() and enable() in one
// transaction (an option changed) leave no gap: the processor goes on.
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <chrono>
#include <string>
#include <thread>
#include <utility>

using namespace std::chrono_literals;
using changefeed::errc;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("disablekeep", CF_TEST_PORT, true);

namespace {

changefeed::Collection coll(const std::string& table) { return {cluster().conninfo(), table}; }

int collection_id(const std::string& table) {
    return cluster()
        .exec("SELECT id FROM changefeed.collections WHERE table_name = '" + table + "'::regclass")[0][0]
        .as<int>();
}

// A new table of two ranges and a started all-versions processor "audit" of
// it, recording what it delivers and the failures it tells.
struct Audited {
    explicit Audited(std::string name) : table(std::move(name)), p(start(table, rec, errors)) {}

    static changefeed::Processor start(const std::string& table, cftest::Recorder& rec, cftest::ErrorLog& errors) {
        cftest::create_table(cluster(), table, 2);
        auto o = cftest::fast_options("one");
        o.on_error = errors.sink();
        auto p = changefeed::make_processor(coll(table), "audit", rec.handler(), changefeed::AllVersionsOptions(o));
        p.start();
        return p;
    }

    const std::string table;
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    changefeed::Processor p;
};

}  // namespace

TEST(DisableKeep, TheGapIsHistoryLostWithItsRunbookNeverSkipped) {
    Audited a("dk_gap");
    auto& [table, rec, errors, p] = a;
    const int id = collection_id(table);
    ASSERT_TRUE(cftest::wait_running(p, 2));
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (1, 'before')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));

    // Disabled under the running processor: it halts (collection not enabled).
    cluster().exec("SELECT changefeed.disable('" + table + "')");
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(errc::collection_not_enabled); }));
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::stopped; }));
    p.stop();
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (2, 'in the gap')");
    // Enabled again with another option: the same collection, the leases kept.
    cluster().exec("SELECT changefeed.enable('" + table + "', ranges => 2, keep_previous => false)");
    EXPECT_EQ(collection_id(table), id);
    EXPECT_EQ(cluster()
                  .exec("SELECT count(*) FROM changefeed.leases WHERE table_name = '" + table +
                        "'::regclass AND processor = 'audit'")[0][0]
                  .as<int>(),
              2);
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (3, 'after')");

    // From its checkpoints, the processor meets the gap: history lost, per range, with the runbook.
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::history_lost; }));
    ASSERT_TRUE(cftest::eventually([&] { return errors.messages(errc::history_lost).size() >= 2; }));
    for (const auto& m : errors.messages(errc::history_lost)) {
        EXPECT_NE(m.find("capture of the table was disabled"), std::string::npos) << m;
        EXPECT_NE(m.find("docs/runbooks/history-lost.md"), std::string::npos) << m;
    }
    // A witness handles markers after it: wake-ups and reads p had too.
    ASSERT_TRUE(cftest::witness_rounds(cluster(), table, 100));
    EXPECT_FALSE(rec.has("3")) << "a change after the gap was delivered as if nothing was missing";
    EXPECT_EQ(rec.size(), 1u);
    auto lag = changefeed::estimate_lag(coll(table), "audit");
    ASSERT_EQ(lag.size(), 2u);
    for (const auto& r : lag) EXPECT_TRUE(r.history_lost);
    p.stop();

    // Following the runbook goes on from now.
    cluster().exec("SELECT changefeed.reset_checkpoint('" + table + "', 'audit')");
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (4, 'after reset')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("4"); }));
    p.stop();
}

TEST(DisableKeep, ResyncRereadsTheTableAfterTheGap) {
    const std::string table = "dk_resync";
    cftest::create_table(cluster(), table, 2);
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.resync = true;
    o.on_error = [](const changefeed::ErrorInfo&) {};
    auto p = changefeed::make_processor(coll(table), "view", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (1, 'before')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    p.stop();
    cluster().exec("SELECT changefeed.disable('" + table + "')");
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, 'in the gap' FROM generate_series(2, 30) g");
    cluster().exec("SELECT changefeed.enable('" + table + "', ranges => 2)");
    p.start();
    // Every document written in the gap arrives, from the table.
    ASSERT_TRUE(cftest::eventually([&] {
        for (int i = 2; i <= 30; ++i)
            if (!rec.has(std::to_string(i))) return false;
        return true;
    }));
    EXPECT_EQ(p.state(), changefeed::State::running);
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (31, 'after')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("31"); }));
    p.stop();
}

TEST(DisableKeep, DisableAndEnableInOneTransactionLeaveNoGap) {
    Audited a("dk_same");
    auto& [table, rec, errors, p] = a;
    ASSERT_TRUE(cftest::wait_running(p, 2));
    p.stop();
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (1, 'stopped')");
    {
        pqxx::connection c(cluster().conninfo());
        pqxx::work tx(c);
        tx.exec("SELECT changefeed.disable('" + table + "')");
        tx.exec("SELECT changefeed.enable('" + table + "', ranges => 4, retention => '3 days')");
        tx.commit();
    }
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (2, 'after')");
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1") && rec.has("2"); }));
    EXPECT_FALSE(errors.has(errc::history_lost));
    p.stop();
}

TEST(DisableKeep, ForgetDropsTheProcessors) {
    const std::string table = "dk_forget";
    cftest::create_table(cluster(), table, 2);
    const int id = collection_id(table);
    cftest::Recorder rec;
    auto p = changefeed::make_processor(coll(table), "audit", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("one")));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    p.stop();
    cluster().exec("SELECT changefeed.disable('" + table + "', forget => true)");
    EXPECT_EQ(cluster()
                  .exec("SELECT count(*) FROM changefeed.lease WHERE collection_id = " + std::to_string(id))[0][0]
                  .as<int>(),
              0);
    EXPECT_EQ(cftest::code_of([&] { p.start(); }), make_error_code(errc::collection_not_enabled));
    cluster().exec("SELECT changefeed.enable('" + table + "', ranges => 2)");
    EXPECT_NE(collection_id(table), id);
}
