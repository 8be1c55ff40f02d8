// Processors and hot standbys: a processor given a standby refuses to start
// (its leases and checkpoints need the primary), and one with the
// read_connection option reads the feed from a standby while its leases and
// checkpoints go to the primary -- delivering what a processor reading the
// primary delivers, also while the standby lags behind.
#include "support/caught_up.hpp"
#include "support/cluster.hpp"
#include "support/feed_check.hpp"
#include "support/recorder.hpp"
#include "support/write_load.hpp"

#include <memory>
#include <set>

using namespace std::chrono_literals;
using changefeed::errc;

namespace {

// The primary and an asynchronous hot standby (the slot's second port): its
// replay can be paused without holding up the primary's commits.
std::unique_ptr<cftest::Cluster> primary, standby;

class StandbyEnvironment : public ::testing::Environment {
public:
    void SetUp() override {
        primary = std::make_unique<cftest::Cluster>("standby-primary", CF_TEST_PORT, true,
                                                    std::vector<std::string>{"changefeed.maintain_interval = 0"});
        primary->start();
        // A first position before the base backup: the standby has the position key.
        primary->exec("SELECT changefeed.current_position()");
        standby = std::make_unique<cftest::Cluster>(primary->make_standby("standby-standby", CF_TEST_PORT + 1));
    }
    void TearDown() override {
        if (standby) standby->stop(true);
        if (primary) primary->stop(true);
    }
};
::testing::Environment* const environment = ::testing::AddGlobalTestEnvironment(new StandbyEnvironment);

void create_versioned(const std::string& table) {
    primary->exec("CREATE TABLE " + table +
                  " (id int PRIMARY KEY, ver int NOT NULL);"
                  "SELECT changefeed.enable('" +
                  table + "', ranges => 8)");
}

// The standby has replayed everything the primary committed so far.
void wait_replayed() {
    const std::string lsn = primary->exec("SELECT pg_current_wal_lsn()::text")[0][0].as<std::string>();
    ASSERT_TRUE(cftest::eventually([&] {
        return standby->exec("SELECT pg_last_wal_replay_lsn() >= '" + lsn + "'::pg_lsn")[0][0].as<bool>();
    })) << "the standby did not replay up to "
        << lsn;
}

int log_rows(cftest::Cluster& c, const std::string& table) {
    return static_cast<int>(cftest::logged_changes(c, table).size());
}

// The standby's clock now.
std::string standby_now() { return standby->exec("SELECT clock_timestamp()::text")[0][0].as<std::string>(); }

// Whether a reader connection on the standby (reading_standby()) ran a read
// that began after `since` (a standby_now()) and is over.
bool standby_read_since(const std::string& since) {
    return standby
        ->exec("SELECT coalesce(bool_or(state LIKE 'idle%' AND query_start > '" + since +
               "'::timestamptz), false) FROM pg_stat_activity WHERE application_name = 'cf_standby_reader'")[0][0]
        .as<bool>(false);
}

changefeed::AllVersionsOptions reading_standby(const std::string& instance) {
    changefeed::AllVersionsOptions o(cftest::fast_options(instance));
    o.read_connection = standby->conninfo() + " application_name=cf_standby_reader";
    o.max_read_size = 200;  // several reads per drain, the read-ahead among them
    o.max_batch_size = 50;
    return o;
}

TEST(Standby, StartOnAStandbyFailsWithReadOnlyServer) {
    const std::string table = cftest::test_table("sb");
    create_versioned(table);
    wait_replayed();
    cftest::Recorder rec;
    auto p = changefeed::make_processor({standby->conninfo(), table}, "on_standby", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("a")));
    try {
        p.start();
        FAIL() << "start() on a standby succeeded";
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), errc::read_only_server);
        EXPECT_NE(std::string(e.what()).find("Connect the processor to the primary"), std::string::npos) << e.what();
    }
    EXPECT_EQ(p.state(), changefeed::State::stopped);
    // Nothing was filed on the primary under that name.
    EXPECT_EQ(primary->exec("SELECT count(*) FROM changefeed.leases WHERE table_name = '" + table + "'::regclass")[0][0]
                  .as<int>(),
              0);

    // A multi-host string that takes any server takes the standby listed first: the same error.
    auto q = changefeed::make_processor({cftest::multi_host_conninfo({standby.get(), primary.get()}, "any"), table},
                                        "on_standby", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("a")));
    EXPECT_EQ(cftest::code_of([&] { q.start(); }), errc::read_only_server);
    // With read-write it finds the primary.
    auto r = changefeed::make_processor({cftest::multi_host_conninfo({standby.get(), primary.get()}), table},
                                        "on_standby", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("a")));
    r.start();
    EXPECT_TRUE(cftest::wait_running(r, 8));
}

TEST(Standby, AReadConnectionThatIsNotReachableFailsStart) {
    const std::string table = cftest::test_table("sb");
    create_versioned(table);
    cftest::Recorder rec;
    auto o = changefeed::AllVersionsOptions(cftest::fast_options("a"));
    o.read_connection = "host=/nonexistent port=1 connect_timeout=1";
    auto p = changefeed::make_processor({primary->conninfo(), table}, "unreachable", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    EXPECT_EQ(cftest::code_of([&] { p.start(); }), errc::connection_failed);
}

TEST(Standby, ReadScaleOutDeliversWhatThePrimaryDelivers) {
    const std::string table = cftest::test_table("sb");
    create_versioned(table);
    wait_replayed();

    cftest::Recorder on_primary, on_standby;
    cftest::ErrorLog errors;
    auto direct = changefeed::make_processor({primary->conninfo(), table}, "direct", on_primary.handler(),
                                             changefeed::AllVersionsOptions(cftest::fast_options("d")));
    auto o = reading_standby("s");
    o.on_error = errors.sink();
    auto scaled = changefeed::make_processor({primary->conninfo(), table}, "scaled", on_standby.handler(),
                                             changefeed::AllVersionsOptions(o));
    direct.start();
    scaled.start();
    ASSERT_TRUE(cftest::wait_running(direct, 8));
    ASSERT_TRUE(cftest::wait_running(scaled, 8));

    // Part one: a write load with the standby replaying.
    {
        cftest::WriteLoad load(primary->conninfo(), table, 50, 600, 500us);
        ASSERT_TRUE(cftest::eventually([&] { return load.done(); }, 120s));
    }
    wait_replayed();
    const int first = log_rows(*primary, table);
    ASSERT_TRUE(cftest::eventually(
        [&] { return cftest::check_feed(cftest::logged_changes(*primary, table), on_standby.all(), false).lost == 0; },
        60s))
        << cftest::check_feed(cftest::logged_changes(*primary, table), on_standby.all(), false);

    // The reads went to the standby: its sessions show the reader's name.
    EXPECT_GE(standby->exec("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cf_standby_reader'")[0][0]
                  .as<int>(),
              1);

    // Part two: the standby stops replaying; the primary goes on.
    standby->exec("SELECT pg_wal_replay_pause()");
    ASSERT_TRUE(cftest::eventually([&] {
        return standby->exec("SELECT pg_get_wal_replay_pause_state()")[0][0].as<std::string>() == "paused";
    }));
    const int replayed = log_rows(*standby, table);
    {
        cftest::WriteLoad load(primary->conninfo(), table, 50, 400, 500us);
        ASSERT_TRUE(cftest::eventually([&] { return load.done(); }, 120s));
    }
    const int second = log_rows(*primary, table);
    ASSERT_GT(second, first);
    // The primary's reader has it all; the standby's reader has no more than the standby replayed.
    ASSERT_TRUE(cftest::eventually(
        [&] { return cftest::check_feed(cftest::logged_changes(*primary, table), on_primary.all(), false).lost == 0; },
        60s));
    EXPECT_EQ(log_rows(*standby, table), replayed);
    {
        std::set<std::string> distinct;
        for (const auto& h : on_standby.all()) distinct.insert(h.change.event_id);
        EXPECT_LE(static_cast<int>(distinct.size()), replayed);
    }

    // Replay resumes: the lag was only a delay.
    standby->exec("SELECT pg_wal_replay_resume()");
    ASSERT_TRUE(cftest::eventually(
        [&] { return cftest::check_feed(cftest::logged_changes(*primary, table), on_standby.all(), false).lost == 0; },
        60s))
        << cftest::check_feed(cftest::logged_changes(*primary, table), on_standby.all(), false);

    const auto logged = cftest::logged_changes(*primary, table);
    const auto via_standby = cftest::check_feed(logged, on_standby.all(), false);
    const auto via_primary = cftest::check_feed(logged, on_primary.all(), false);
    EXPECT_TRUE(via_standby.ok()) << via_standby;
    EXPECT_TRUE(via_primary.ok()) << via_primary;
    EXPECT_EQ(via_standby.distinct, via_primary.distinct);
    EXPECT_EQ(scaled.state(), changefeed::State::running);
    EXPECT_FALSE(errors.has(errc::history_lost));

    // The checkpoints are on the primary, and they read there: the standby's
    // positions are the primary's.
    direct.stop();
    scaled.stop();
    auto after = primary->exec("SELECT count(DISTINCT l.range_id), count(r.seq) FROM changefeed.leases l"
                               "  LEFT JOIN LATERAL changefeed.read(l.table_name, l.checkpoint, 1000,"
                               "                                    ARRAY[l.range_id]) r ON true"
                               " WHERE l.table_name = '" +
                               table + "'::regclass AND l.processor = 'scaled'");
    EXPECT_EQ(after[0][0].as<int>(), 8);
    EXPECT_EQ(after[0][1].as<int>(), 0) << "changes after the stored checkpoints";
}

// The standby's reader sessions are cut while a backlog drains, three times,
// each time after more changes were handled: the processor reconnects and
// resumes from its checkpoints on the primary, losing and reordering nothing.
TEST(Standby, AReaderConnectionCutMidDrainResumesWithoutLoss) {
    const std::string table = cftest::test_table("sbcut");
    create_versioned(table);
    wait_replayed();

    cftest::Recorder rec;
    cftest::ErrorLog errors;
    auto o = reading_standby("c");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor({primary->conninfo(), table}, "cut", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 8));

    int cuts = 0;
    {
        cftest::WriteLoad load(primary->conninfo(), table, 50, 1500, 500us);
        for (int i = 0; i < 3; ++i) {
            const auto handled = rec.all().size();
            ASSERT_TRUE(cftest::eventually([&] { return rec.all().size() >= handled + 150; }, 120s))
                << "nothing handled before cut " << i + 1;
            cuts += standby
                        ->exec("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                               " WHERE application_name = 'cf_standby_reader'")[0][0]
                        .as<int>();
        }
        ASSERT_TRUE(cftest::eventually([&] { return load.done(); }, 120s));
    }
    EXPECT_GE(cuts, 3) << "every cut found a reader session";
    wait_replayed();
    ASSERT_TRUE(cftest::eventually(
        [&] { return cftest::check_feed(cftest::logged_changes(*primary, table), rec.all(), false).lost == 0; }, 60s))
        << cftest::check_feed(cftest::logged_changes(*primary, table), rec.all(), false);
    const auto r = cftest::check_feed(cftest::logged_changes(*primary, table), rec.all(), false);
    EXPECT_TRUE(r.ok()) << r;
    EXPECT_EQ(p.state(), changefeed::State::running);
    EXPECT_FALSE(errors.has(errc::history_lost));
    // It reads on the standby again.
    const std::string since = standby_now();
    primary->exec("INSERT INTO " + table + " (id, ver) VALUES (100000, 1)");
    EXPECT_TRUE(cftest::eventually([&] { return standby_read_since(since); }));
    p.stop();
}

TEST(Standby, APositionTheStandbyHasNotReplayedOnlyDelays) {
    const std::string table = cftest::test_table("sb");
    create_versioned(table);
    wait_replayed();
    standby->exec("SELECT pg_wal_replay_pause()");
    ASSERT_TRUE(cftest::eventually([&] {
        return standby->exec("SELECT pg_get_wal_replay_pause_state()")[0][0].as<std::string>() == "paused";
    }));
    {
        cftest::WriteLoad load(primary->conninfo(), table, 20, 100, 500us);
        ASSERT_TRUE(cftest::eventually([&] { return load.done(); }, 60s));
    }
    // First started now: its leases hold the primary's position, ahead of the standby.
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    auto o = reading_standby("s");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor({primary->conninfo(), table}, "ahead", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 8));
    {
        cftest::WriteLoad load(primary->conninfo(), table, 20, 100, 500us);
        ASSERT_TRUE(cftest::eventually([&] { return load.done(); }, 60s));
    }
    // It reads the standby only: nothing of what the standby has not replayed
    // (a read from the primary would have delivered it by now).  Two reads
    // of the standby, one after the other, began after the load and are over
    // (a read ahead begun before is taken by the first at the latest).
    for (int round = 0; round < 2; ++round) {
        const auto since = standby_now();
        ASSERT_TRUE(cftest::eventually([&] { return standby_read_since(since); }))
            << "no read of the standby after " << since;
    }
    EXPECT_EQ(rec.size(), 0u);
    EXPECT_EQ(p.state(), changefeed::State::running);
    standby->exec("SELECT pg_wal_replay_resume()");
    // Exactly the changes written after its start: none lost, nothing from before.
    auto logged = cftest::logged_changes(*primary, table);
    std::vector<cftest::LoggedChange> after_start(logged.begin() + 100, logged.end());
    ASSERT_TRUE(cftest::eventually([&] { return cftest::check_feed(after_start, rec.all(), false).lost == 0; }, 60s))
        << cftest::check_feed(after_start, rec.all(), false);
    const auto check = cftest::check_feed(after_start, rec.all(), false);
    EXPECT_TRUE(check.ok()) << check;
    EXPECT_EQ(p.state(), changefeed::State::running);
    EXPECT_FALSE(errors.has(errc::history_lost));
}

// A standby that applies every commit a little late: the primary's wake-up
// comes first, and an empty read of the standby must not leave the change to
// the poll interval (a minute here).
TEST(Standby, AWakeUpThatComesBeforeTheStandbyReplayedIsNotLost) {
    const std::string table = cftest::test_table("sb");
    create_versioned(table);
    wait_replayed();
    auto set_delay = [](const std::string& value) {
        pqxx::connection c(standby->conninfo());
        pqxx::nontransaction tx(c);
        tx.exec("ALTER SYSTEM SET recovery_min_apply_delay = '" + value + "'");
        tx.exec("SELECT pg_reload_conf()");
    };
    set_delay("300ms");
    cftest::Recorder rec;
    auto o = reading_standby("s");
    o.poll_interval = 1min;
    auto idle = std::make_shared<cftest::CaughtUp>();
    o.metrics = idle;
    auto p = changefeed::make_processor({primary->conninfo(), table}, "late", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 8));
    // The start's own reads are over: every range found nothing waiting, and
    // waits for a wake-up (or the poll interval).
    ASSERT_TRUE(cftest::eventually([&] { return idle->ranges() == 8; }));
    for (int i = 1; i <= 3; ++i) {
        primary->exec("INSERT INTO " + table + " VALUES (" + std::to_string(i) + ", 1)");
        const std::string id = std::to_string(i);
        EXPECT_TRUE(cftest::eventually([&] { return rec.has(id); }, 20s)) << "change " << id << " waited for the poll";
    }
    p.stop();
    set_delay("0");
}

TEST(Standby, TheInMemoryProviderRefusesReadConnection) {
    changefeed::InMemoryCollection c;
    auto o = changefeed::AllVersionsOptions(cftest::fast_options("a"));
    o.read_connection = standby->conninfo();
    EXPECT_EQ(cftest::code_of([&] { (void)changefeed::make_processor(c, "x", cftest::noop_handler(), o); }),
              errc::invalid_option);
}

}  // namespace
