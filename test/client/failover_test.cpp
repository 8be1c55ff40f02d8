// Failover: a primary with a synchronous hot standby (remote_apply), a write
// load, an all-versions and a latest-version processor connected with
// "host=A,B target_session_attrs=read-write"; the primary stops at once
// (pg_ctl stop -m immediate) and the standby is promoted.  The processors
// resume on their own from the checkpoints the new primary has: nothing
// acknowledged is lost, nothing handled was never committed, and each
// document's changes come in order.
#include "support/cluster.hpp"
#include "support/feed_check.hpp"
#include "support/recorder.hpp"
#include "support/write_load.hpp"

#include <memory>

using namespace std::chrono_literals;
using changefeed::errc;

namespace {

// The standby is made from a primary where the extension has never made a
// position: how a highly available cluster is usually built (standby first).
constexpr bool standby_before_first_position = true;

TEST(Failover, ProcessorsFollowAPromotedStandbyLosingNothing) {
    const std::vector<std::string> conf{"synchronous_commit = remote_apply", "changefeed.maintain_interval = 0"};
    cftest::Cluster primary("failover-a", CF_TEST_PORT, true, conf, false);
    primary.start();
    std::optional<cftest::Cluster> standby;
    // Synchronous once the standby exists (before, every commit would wait for it).
    auto make_standby = [&] {
        standby.emplace(primary.make_standby("failover-b", CF_TEST_PORT + 1));
        pqxx::connection c(primary.conninfo());
        pqxx::nontransaction tx(c);
        tx.exec("ALTER SYSTEM SET synchronous_standby_names = '*'");
        tx.exec("SELECT pg_reload_conf()");
    };
    if (standby_before_first_position) make_standby();
    primary.exec("CREATE EXTENSION changefeed");
    const std::string table = "ha_docs";
    primary.exec("CREATE TABLE " + table +
                 " (id int PRIMARY KEY, ver int NOT NULL);"
                 "SELECT changefeed.enable('" +
                 table + "')");
    if (!standby_before_first_position) {
        primary.exec("SELECT changefeed.current_position()");
        make_standby();
    }
    // Synchronous from here on: a commit returns once the standby applied it.
    ASSERT_TRUE(cftest::eventually([&] {
        return primary.exec("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")[0][0].as<int>() == 1;
    }));

    const std::string both = cftest::multi_host_conninfo({&primary, &*standby});
    cftest::Recorder all_rec, latest_rec;
    cftest::ErrorLog all_errors, latest_errors;
    auto all_opt = changefeed::AllVersionsOptions(cftest::fast_options("all-1"));
    all_opt.on_error = all_errors.sink();
    all_opt.max_read_size = 300;  // several reads in flight around the stop, read-ahead among them
    changefeed::LatestVersionOptions latest_opt(cftest::fast_options("latest-1"));
    latest_opt.on_error = latest_errors.sink();
    auto all = changefeed::make_processor({both, table}, "ha_all", all_rec.handler(),
                                          changefeed::AllVersionsOptions(all_opt));
    auto latest = changefeed::make_processor({both, table}, "ha_latest", latest_rec.handler(), latest_opt);
    all.start();
    latest.start();
    ASSERT_TRUE(cftest::wait_running(all, 16));
    ASSERT_TRUE(cftest::wait_running(latest, 16));

    cftest::WriteLoad load(both, table, 200, 3000, 500us);
    ASSERT_TRUE(cftest::eventually([&] { return load.acknowledged() >= 1000; }, 120s));
    ASSERT_TRUE(cftest::eventually([&] { return all_rec.size() >= 500; }, 60s));
    primary.stop(true);  // pg_ctl stop -m immediate
    standby->promote();
    ASSERT_TRUE(cftest::eventually([&] { return load.done(); }, 180s)) << "the writer did not finish";
    load.stop();
    EXPECT_GT(load.failed(), 0) << "the writer never saw the failover";

    // Every acknowledged write is on the new primary (synchronous replication).
    const auto acked = load.acknowledged_versions();
    auto rows = standby->exec("SELECT id, ver FROM " + table);
    std::map<int, int> now;
    for (auto row : rows) now[row[0].as<int>()] = row[1].as<int>();
    int acked_lost = 0;
    for (const auto& [id, ver] : acked)
        if (now[id] < ver) ++acked_lost;
    EXPECT_EQ(acked_lost, 0);

    const auto logged = cftest::logged_changes(*standby, table);
    ASSERT_TRUE(cftest::eventually(
        [&] {
            return cftest::check_feed(logged, all_rec.all(), false).lost == 0 &&
                   cftest::check_feed(logged, latest_rec.all(), true).lost == 0;
        },
        120s))
        << "all versions: " << cftest::check_feed(logged, all_rec.all(), false)
        << "; latest: " << cftest::check_feed(logged, latest_rec.all(), true);
    const auto all_check = cftest::check_feed(logged, all_rec.all(), false);
    const auto latest_check = cftest::check_feed(logged, latest_rec.all(), true);
    EXPECT_TRUE(all_check.ok()) << all_check;
    EXPECT_TRUE(latest_check.ok()) << latest_check;
    std::cout << "[ figures  ] acknowledged=" << load.acknowledged() << " failed=" << load.failed()
              << " all versions: " << all_check << "; latest: " << latest_check << std::endl;

    // They resumed on their own and hold every lease on the new primary.
    EXPECT_TRUE(cftest::wait_running(all, 16));
    EXPECT_TRUE(cftest::wait_running(latest, 16));
    EXPECT_FALSE(all_errors.has(errc::history_lost));
    EXPECT_FALSE(latest_errors.has(errc::history_lost));
    EXPECT_FALSE(all_errors.has(errc::halted));
    EXPECT_FALSE(latest_errors.has(errc::halted));

    // Writes after the failover reach them too, woken by the promoted server's notifier.
    standby->exec("INSERT INTO " + table + " VALUES (100000, 1)");
    EXPECT_TRUE(cftest::eventually([&] { return all_rec.has("100000") && latest_rec.has("100000"); }));
    all.stop();
    latest.stop();
    standby->stop(true);
}

}  // namespace
