// Processor names no stranger can use: a role that may not read a table
// cannot file anything under a processor name of it before or after the real
// service starts (deduplication records, instances, leases), and a role that
// may read it and claims a name first gains nothing once an admin gives the
// name to the service.  The service's projector applies every change and its
// one instance gets every range.
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <pqxx/pqxx>

#include <atomic>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("trust", CF_TEST_PORT, true);

namespace {

class Trust : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        // svc: the real service; att: a processor role without SELECT; sq: a
        // processor role with SELECT; adm: an admin without table privileges.
        cftest::create_login_role(cluster(), "tr_svc", {"changefeed_processor"});
        cftest::create_login_role(cluster(), "tr_att", {"changefeed_processor"});
        cftest::create_login_role(cluster(), "tr_sq", {"changefeed_processor"});
        cftest::create_login_role(cluster(), "tr_adm", {"changefeed_admin"});
    }

    static changefeed::Collection table_for(const std::string& table, int ranges, const std::string& readers) {
        cftest::create_table(cluster(), table, ranges);
        cluster().exec("GRANT SELECT ON " + table + " TO " + readers);
        return changefeed::Collection(cluster().conninfo_as("tr_svc"), table);
    }
};

// The SQLSTATE of `sql` on `c` ("" if it succeeds).
std::string sqlstate_on(pqxx::connection& c, const std::string& sql) {
    try {
        pqxx::nontransaction tx(c);
        tx.exec(sql);
        return "";
    } catch (const pqxx::insufficient_privilege&) {
        return "42501";  // libpqxx 6 leaves sqlstate() empty for this one
    } catch (const pqxx::sql_error& e) {
        return e.sqlstate().empty() ? "(unknown)" : e.sqlstate();
    }
}

// The event ids the next changes of `table` are likely to get: the next
// transactions crossed with the next sequence numbers.
std::string predicted_ids(const std::string& table, int txids, int seqs) {
    auto r = cluster().exec("SELECT c.id, pg_snapshot_xmax(pg_current_snapshot())::text::bigint,"
                            "       (SELECT last_value FROM changefeed.log_seq)"
                            "  FROM changefeed.collection c WHERE c.relid = '" +
                            table + "'::regclass");
    const auto cid = r[0][0].as<long long>(), xmax = r[0][1].as<long long>(), seq = r[0][2].as<long long>();
    return "ARRAY(SELECT '" + std::to_string(cid) + ".' || t || '.' || s FROM generate_series(" + std::to_string(xmax) +
           ", " + std::to_string(xmax + txids) + ") t, generate_series(" + std::to_string(seq + 1) + ", " +
           std::to_string(seq + seqs) + ") s)";
}

TEST_F(Trust, AProjectorWhoseStoreAStrangerTriedToPrefillAppliesEveryChange) {
    auto coll = table_for("tr_orders", 4, "tr_svc");
    const std::string ids = predicted_ids("tr_orders", 40, 400);
    // Before the service ever started: the name is nobody's, nothing is filed.
    EXPECT_EQ(cftest::sqlstate_as(cluster(), "tr_att",
                                  "SELECT changefeed.dedup_record('tr_orders', 'projector', " + ids + ")"),
              "CF012");
    EXPECT_EQ(cftest::sqlstate_as(cluster(), "tr_att", "SELECT changefeed.lease_init('tr_orders', 'projector')"),
              "42501");

    std::atomic<int> calls{0};
    changefeed::LatestVersionOptions o = cftest::fast_options("svc-1");
    o.max_batch_size = 7;
    auto p = changefeed::make_processor(
        coll, "projector", changefeed::Projector([&](const changefeed::Change&, const changefeed::Context&) {
            ++calls;
            return changefeed::ProjectionResult::applied;
        }),
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4u));
    // After it started: the name is svc's.
    EXPECT_EQ(cftest::sqlstate_as(cluster(), "tr_att",
                                  "SELECT changefeed.dedup_record('tr_orders', 'projector', " + ids + ")"),
              "42501");
    for (int t = 0; t < 10; ++t)
        cluster().exec("INSERT INTO tr_orders (id, v) SELECT g, 'x' FROM generate_series(" +
                       std::to_string(t * 10 + 1) + ", " + std::to_string(t * 10 + 10) + ") g");
    ASSERT_TRUE(cftest::eventually([&] { return p.projection_stats().applied == 100; }));
    p.stop();
    const auto stats = p.projection_stats();
    EXPECT_EQ(stats.applied, 100);
    EXPECT_EQ(stats.skipped_duplicate, 0);
    EXPECT_EQ(calls.load(), 100);
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM changefeed.applied WHERE processor = 'projector'")[0][0].as<int>(),
              100);
}

TEST_F(Trust, AProcessorWhoseNameAStrangerTriedToSquatGetsAllItsRanges) {
    auto coll = table_for("tr_billing", 16, "tr_svc");
    // att keeps a session open, as it would to keep phantom instances alive.
    pqxx::connection att(cluster().conninfo_as("tr_att"));
    for (int i = 1; i <= 15; ++i)
        EXPECT_EQ(sqlstate_on(att, "SELECT changefeed.instance_register('tr_billing', 'billing', 'phantom-" +
                                       std::to_string(i) + "', 't')"),
                  "CF012");
    EXPECT_EQ(sqlstate_on(att, "SELECT changefeed.lease_init('tr_billing', 'billing')"), "42501");
    EXPECT_EQ(sqlstate_on(att, "SELECT changefeed.dedup_record('tr_billing', 'billing', ARRAY['x'])"), "CF012");

    for (int round = 0; round < 2; ++round) {
        auto p = changefeed::make_processor(coll, "billing", cftest::noop_handler(),
                                            changefeed::LatestVersionOptions(cftest::fast_options("svc-1")));
        p.start();
        EXPECT_TRUE(cftest::wait_running(p, 16u)) << "round " << round;
        // Once started, the name is svc's: still nothing for att.
        EXPECT_EQ(sqlstate_on(att, "SELECT changefeed.instance_register('tr_billing', 'billing', 'phantom-1', 't')"),
                  "42501");
        p.stop();
    }
    EXPECT_EQ(
        cluster().exec("SELECT count(*) FROM changefeed.instance WHERE instance LIKE 'phantom-%'")[0][0].as<int>(), 0);
}

TEST_F(Trust, ANameClaimedFirstByARoleThatMayReadIsGivenBackByAnAdmin) {
    auto coll = table_for("tr_reports", 16, "tr_svc, tr_sq");
    // sq claims the name first and keeps 15 phantom instances alive.
    pqxx::connection sq(cluster().conninfo_as("tr_sq"));
    EXPECT_EQ(sqlstate_on(sq, "SELECT changefeed.lease_init('tr_reports', 'reports')"), "");
    for (int i = 1; i <= 15; ++i)
        EXPECT_EQ(sqlstate_on(sq, "SELECT changefeed.instance_register('tr_reports', 'reports', 'phantom-" +
                                      std::to_string(i) + "', 't')"),
                  "");
    EXPECT_EQ(sqlstate_on(sq, "SELECT changefeed.dedup_record('tr_reports', 'reports', ARRAY['x'])"), "");

    // Loud: the service cannot start under a name another role holds.
    auto refused = changefeed::make_processor(coll, "reports", cftest::noop_handler(),
                                              changefeed::LatestVersionOptions(cftest::fast_options("svc-1")));
    EXPECT_EQ(cftest::code_of([&] { refused.start(); }), changefeed::errc::permission_denied);

    // An admin gives the name to svc: what sq filed under it is gone.
    EXPECT_EQ(cluster()
                  .exec_as("tr_adm", "SELECT changefeed.reserve_processor('tr_reports', 'reports', 'tr_svc')")[0][0]
                  .as<bool>(),
              true);
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM changefeed.instance WHERE processor = 'reports'")[0][0].as<int>(),
              0);
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM changefeed.applied WHERE processor = 'reports'")[0][0].as<int>(), 0);
    EXPECT_EQ(sqlstate_on(sq, "SELECT changefeed.instance_register('tr_reports', 'reports', 'phantom-16', 't')"),
              "42501");

    cftest::Recorder rec;
    auto p = changefeed::make_processor(coll, "reports", rec.handler(),
                                        changefeed::LatestVersionOptions(cftest::fast_options("svc-1")));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 16u));
    cluster().exec("INSERT INTO tr_reports (id, v) SELECT g, 'x' FROM generate_series(1, 50) g");
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 50; }));
    p.stop();
}

}  // namespace
