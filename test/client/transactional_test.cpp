// The transactional handler: its writes and the batch's checkpoint commit in
// one transaction on the feed's database, so a change is applied exactly once
// -- through handler failures, killed connections and a lease taken away
// while the handler runs.  The processors run as a role that is only a member
// of changefeed_processor (with rights on the projection tables).
#include "support/caught_up.hpp"
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <atomic>
#include <future>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("transactional", CF_TEST_PORT, true);

namespace {

const char* const kRole = "transactional_svc";

void ensure_role() {
    static std::once_flag once;
    std::call_once(once, [] { cftest::create_login_role(cluster(), kRole, {"changefeed_processor"}); });
}

// The source table, enabled, readable by the role; `projection` tables
// (id int primary key, v text) and the applied counts, writable by it.
changefeed::Collection setup(const std::string& table, int ranges, const std::string& app) {
    ensure_role();
    cftest::create_table(cluster(), table, ranges);
    cluster().exec("CREATE TABLE " + table +
                   "_copy (id int PRIMARY KEY, v text);"
                   "CREATE TABLE " +
                   table +
                   "_applied (event_id text PRIMARY KEY, n int NOT NULL);"
                   "CREATE TABLE " +
                   table +
                   "_attempts (n serial);"
                   "GRANT SELECT ON " +
                   table + " TO " + kRole +
                   ";"
                   "GRANT ALL ON " +
                   table + "_copy, " + table + "_applied, " + table + "_attempts TO " + kRole +
                   ";"
                   "GRANT USAGE ON SEQUENCE " +
                   table + "_attempts_n_seq TO " + kRole);
    return changefeed::Collection(cluster().conninfo_as(kRole) + " application_name=" + app, table);
}

// Applies a batch to <table>_copy and counts each event id, in `tx`.
void apply(const std::string& table, const std::vector<changefeed::Change>& batch, pqxx::transaction_base& tx) {
    for (const auto& c : batch) {
        if (c.operation == changefeed::Operation::delete_)
            tx.exec_params("DELETE FROM " + table + "_copy WHERE id = $1::int", c.doc_id);
        else
            tx.exec_params("INSERT INTO " + table +
                               "_copy VALUES ($1::int, $2)"
                               " ON CONFLICT (id) DO UPDATE SET v = excluded.v",
                           c.doc_id, std::string(c.current.at("v").as_string()));
        tx.exec_params("INSERT INTO " + table +
                           "_applied VALUES ($1, 1)"
                           " ON CONFLICT (event_id) DO UPDATE SET n = " +
                           table + "_applied.n + 1",
                       c.event_id);
    }
}

std::int64_t count_of(const std::string& sql) { return cluster().exec(sql)[0][0].as<std::int64_t>(); }

bool copy_equals_source(const std::string& table) {
    return count_of("SELECT count(*) FROM (SELECT id, v FROM " + table + " EXCEPT SELECT id, v FROM " + table +
                    "_copy) a") == 0 &&
           count_of("SELECT count(*) FROM (SELECT id, v FROM " + table + "_copy EXCEPT SELECT id, v FROM " + table +
                    ") b") == 0;
}

TEST(Transactional, AHandlerThatWritesThenThrowsLeavesNothingAndGetsTheBatchAgain) {
    auto coll = setup("tx_throw", 1, "tx_throw");
    std::mutex mu;
    std::vector<std::vector<std::string>> attempts;  // event ids of each call
    cftest::ErrorLog errors;
    auto idle = std::make_shared<cftest::CaughtUp>();
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.on_error = errors.sink();
    o.metrics = idle;
    auto p = changefeed::make_processor(
        coll, "tx",
        changefeed::TransactionalHandler([&](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                                             const changefeed::Context&) {
            tx.sql().exec("INSERT INTO tx_throw_attempts DEFAULT VALUES");
            apply("tx_throw", batch, tx.sql());
            std::lock_guard lock(mu);
            attempts.emplace_back();
            for (const auto& c : batch) attempts.back().push_back(c.event_id);
            if (attempts.size() == 1) throw std::runtime_error("fails after writing");
            EXPECT_EQ(cftest::code_of([&] { tx.memory(); }), make_error_code(changefeed::errc::invalid_option));
        }),
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1u));
    cluster().exec("INSERT INTO tx_throw (id, v) SELECT g, 'x' FROM generate_series(1, 5) g");
    ASSERT_TRUE(cftest::eventually([&] { return count_of("SELECT count(*) FROM tx_throw_copy") == 5; }));
    // No third call: the range read again and found nothing waiting.
    const auto reads = idle->by_range();
    ASSERT_TRUE(cftest::eventually([&] { return idle->all_again(reads, 1); }));
    {
        std::lock_guard lock(mu);
        ASSERT_EQ(attempts.size(), 2u);
        EXPECT_EQ(attempts[0], attempts[1]);  // the same batch again
    }
    EXPECT_EQ(count_of("SELECT count(*) FROM tx_throw_attempts"), 1);  // the failed call's write rolled back
    EXPECT_EQ(count_of("SELECT max(n) FROM tx_throw_applied"), 1);
    EXPECT_TRUE(errors.has(changefeed::errc::handler_failed));
    EXPECT_EQ(p.projection_stats().applied, 0);  // not a projector
}

TEST(Transactional, ExactlyOnceWhileItsConnectionsAreKilled) {
    auto coll = setup("tx_kill", 4, "tx_kill_proc");
    changefeed::ProcessorOptions o = cftest::fast_options("one");
    o.max_batch_size = 7;
    std::atomic<int> calls{0};
    auto p = changefeed::make_processor(
        coll, "tx",
        changefeed::TransactionalHandler([&](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                                             const changefeed::Context&) {
            apply("tx_kill", batch, tx.sql());
            ++calls;
            std::this_thread::sleep_for(5ms);  // a window for the kills to land in
        }),
        changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4u));
    std::atomic<bool> writing{true};
    std::thread writer([&] {
        for (int i = 0; i < 40; ++i) {
            cluster().exec("INSERT INTO tx_kill (id, v) SELECT g, 'v0' FROM generate_series(" +
                           std::to_string(i * 10 + 1) + ", " + std::to_string(i * 10 + 10) + ") g");
            cluster().exec("UPDATE tx_kill SET v = 'v" + std::to_string(i) +
                           "' WHERE id % 7 = " + std::to_string(i % 7));
            std::this_thread::sleep_for(20ms);
        }
        writing = false;
    });
    int kills = 0;
    while (writing) {
        std::this_thread::sleep_for(120ms);
        kills += count_of("SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE application_name = 'tx_kill_proc') k") > 0;
    }
    writer.join();
    EXPECT_GE(kills, 3);
    // Every logged change of the table: the inserts and the updates.
    const auto logged = count_of(
        "SELECT count(*) FROM changefeed.log l JOIN changefeed.collections c ON c.id = l.collection_id"
        " WHERE c.table_name = 'tx_kill'::regclass");
    ASSERT_TRUE(cftest::eventually([&] { return count_of("SELECT count(*) FROM tx_kill_applied") == logged; }, 60s));
    EXPECT_TRUE(copy_equals_source("tx_kill"));
    EXPECT_EQ(count_of("SELECT max(n) FROM tx_kill_applied"), 1);  // none applied twice
    EXPECT_GT(calls.load(), 0);
}

TEST(Transactional, ALeaseTakenAwayWhileTheHandlerRunsRefusesItsTransaction) {
    auto coll = setup("tx_steal", 1, "tx_steal");
    std::promise<void> entered, release;
    auto released = release.get_future().share();
    std::atomic<int> calls{0};
    cftest::ErrorLog errors;
    auto idle = std::make_shared<cftest::CaughtUp>();
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.on_error = errors.sink();
    o.metrics = idle;
    auto p = changefeed::make_processor(
        coll, "tx",
        changefeed::TransactionalHandler([&](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                                             const changefeed::Context&) {
            apply("tx_steal", batch, tx.sql());
            if (++calls == 1) {
                entered.set_value();
                released.wait();
            }
        }),
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1u));
    cluster().exec("INSERT INTO tx_steal (id, v) SELECT g, 'x' FROM generate_series(1, 5) g");
    ASSERT_EQ(entered.get_future().wait_for(30s), std::future_status::ready);
    // The owner moves the checkpoint to now: the lease gets a new epoch.
    EXPECT_EQ(cftest::sqlstate_as(cluster(), kRole, "SELECT changefeed.reset_checkpoint('tx_steal', 'tx')"), "");
    release.set_value();
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(changefeed::errc::lease_lost); }));
    // Nothing of it is handled again: the range, back from the reset
    // checkpoint, read and found nothing waiting.
    const auto reads = idle->by_range();
    ASSERT_TRUE(cftest::eventually([&] { return idle->all_again(reads, 1); }));
    EXPECT_EQ(count_of("SELECT count(*) FROM tx_steal_copy"), 0);  // nothing of it committed
    EXPECT_EQ(count_of("SELECT count(*) FROM tx_steal_applied"), 0);
    // The range comes back from the reset checkpoint and goes on.
    ASSERT_TRUE(cftest::wait_running(p, 1u));
    cluster().exec("INSERT INTO tx_steal (id, v) VALUES (100, 'after')");
    ASSERT_TRUE(cftest::eventually([&] { return count_of("SELECT count(*) FROM tx_steal_copy") == 1; }));
}

}  // namespace
