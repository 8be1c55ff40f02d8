// The extension's wake-up: with the library preloaded a background worker
// sends the notifications (coalescing commits); without preload the writer's
// own transaction sends one per transaction.  Rolled-back writes send nothing.
#include "support/cluster.hpp"
#include "support/listening.hpp"
#include "support/recorder.hpp"

#include <pqxx/pqxx>

#include <atomic>
#include <memory>
#include <thread>

using namespace std::chrono_literals;

namespace {

cftest::Cluster* preloaded = nullptr;
cftest::Cluster* plain = nullptr;

class TwoClusters : public ::testing::Environment {
public:
    void SetUp() override {
        preloaded = new cftest::Cluster("notifier-preload", CF_TEST_PORT, true);
        plain = new cftest::Cluster("notifier-plain", CF_TEST_PORT + 1, false);
        preloaded->start();
        plain->start();
    }
    void TearDown() override {
        preloaded->stop(true);
        plain->stop(true);
    }
};
::testing::Environment* const env = ::testing::AddGlobalTestEnvironment(new TwoClusters);

using cftest::Listening;

void make_table(cftest::Cluster& c, const std::string& name) { cftest::create_table(c, name, 4); }

int notifier_pid(cftest::Cluster& c) {
    int pid = 0;
    cftest::eventually([&] {
        auto r = c.exec("SELECT pid FROM pg_stat_activity WHERE backend_type = 'changefeed notifier'"
                        " AND datname = current_database()");
        if (r.empty()) return false;
        pid = r[0][0].as<int>();
        return true;
    });
    return pid;
}

TEST(Notifier, PreloadedTheWorkerSendsTheNotificationNotTheWriter) {
    make_table(*preloaded, "n_worker");
    Listening l(*preloaded, {"n_worker"});
    pqxx::connection writer(preloaded->conninfo());
    {
        pqxx::work tx(writer);
        tx.exec("INSERT INTO n_worker (id) VALUES (1)");
        tx.commit();
    }
    ASSERT_TRUE(l.wait([](const auto& got) { return !got.empty(); }));
    int worker = notifier_pid(*preloaded);
    ASSERT_NE(worker, 0);
    EXPECT_EQ(l.got()[0].pid, worker);
    EXPECT_NE(l.got()[0].pid, writer.backendpid());
}

TEST(Notifier, PreloadedManyCommitsCoalesceIntoFewerNotifications) {
    make_table(*preloaded, "n_coalesce");
    Listening l(*preloaded, {"n_coalesce"});
    // Commits from several connections at once outpace one NOTIFY per commit.
    const int writers = 8, per_writer = 100, commits = writers * per_writer;
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w)
        threads.emplace_back([w] {
            pqxx::connection writer(preloaded->conninfo());
            for (int i = 0; i < per_writer; ++i) {
                pqxx::work tx(writer);
                tx.exec("INSERT INTO n_coalesce (id) VALUES (" + std::to_string(w * per_writer + i) + ")");
                tx.commit();
            }
        });
    for (auto& t : threads) t.join();
    ASSERT_TRUE(l.wait([](const auto& got) { return !got.empty(); }));
    l.drain(1s);
    EXPECT_GE(l.count("n_coalesce"), 1u);
    EXPECT_LT(l.count("n_coalesce"), static_cast<std::size_t>(commits));
}

TEST(Notifier, NotPreloadedTheWriterSendsOnePerTransaction) {
    make_table(*plain, "n_plain");
    make_table(*plain, "n_plain_marker");
    Listening l(*plain, {"n_plain", "n_plain_marker"});
    pqxx::connection writer(plain->conninfo());
    for (int t = 0; t < 3; ++t) {
        pqxx::work tx(writer);
        for (int i = 0; i < 50; ++i) tx.exec("INSERT INTO n_plain (id) VALUES (" + std::to_string(t * 100 + i) + ")");
        tx.exec("UPDATE n_plain SET v = 'x'");
        tx.commit();
    }
    // A marker transaction after them: one session's notifications arrive in
    // commit order, so any extra one of n_plain would have come first.
    {
        pqxx::work tx(writer);
        tx.exec("INSERT INTO n_plain_marker (id) VALUES (1)");
        tx.commit();
    }
    ASSERT_TRUE(l.wait([&](const auto&) { return l.count("n_plain_marker") == 1; }));
    ASSERT_EQ(l.count("n_plain"), 3u);
    for (const auto& r : l.got()) EXPECT_EQ(r.pid, writer.backendpid());
}

// A rolled-back write on one table, then a committed one on another: the
// second's notification arrives, the first's never does.
void rollback_sends_nothing(cftest::Cluster& c, const std::string& suffix) {
    make_table(c, "n_rolled_" + suffix);
    make_table(c, "n_kept_" + suffix);
    Listening l(c, {"n_rolled_" + suffix, "n_kept_" + suffix});
    pqxx::connection writer(c.conninfo());
    {
        pqxx::work tx(writer);
        tx.exec("INSERT INTO n_rolled_" + suffix + " (id) VALUES (1)");
        tx.abort();
    }
    {
        pqxx::work tx(writer);
        tx.exec("INSERT INTO n_kept_" + suffix + " (id) VALUES (1)");
        tx.commit();
    }
    ASSERT_TRUE(l.wait([&](const auto&) { return l.count("n_kept_" + suffix) >= 1; }));
    l.drain(500ms);
    EXPECT_EQ(l.count("n_rolled_" + suffix), 0u);
}

// The backend of a processor's read waiting in the server for a commit
// (read_ranges(..., wait)): its pid and whether it holds an xmin; 0 if none.
std::pair<int, bool> long_poll_backend(cftest::Cluster& c) {
    auto r = c.exec("SELECT pid, backend_xmin IS NOT NULL FROM pg_stat_activity"
                    " WHERE state = 'active' AND wait_event_type = 'Extension'"
                    "   AND query LIKE '%changefeed.read_ranges%wait =>%'");
    if (r.empty()) return {0, false};
    return {r[0][0].as<int>(), r[0][1].as<bool>()};
}

// Preloaded, a caught-up processor's next read waits in the server for a
// commit and returns it in the same round trip; it holds no xmin meanwhile.
TEST(Notifier, PreloadedACaughtUpProcessorWaitsInTheServerForACommit) {
    make_table(*preloaded, "n_long_poll");
    cftest::Recorder rec;
    std::atomic<int> errors{0};
    auto o = cftest::fast_options("one");
    o.on_error = [&](const changefeed::ErrorInfo&) { ++errors; };
    o.lease_duration = 20s;  // the wait stays within half the leases' validity
    o.renew_interval = 2s;
    o.poll_interval = 5s;
    auto p = changefeed::make_processor({preloaded->conninfo(), "n_long_poll"}, "waits", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    std::pair<int, bool> waiting;
    ASSERT_TRUE(cftest::eventually([&] { return (waiting = long_poll_backend(*preloaded)).first != 0; }));
    EXPECT_FALSE(waiting.second) << "the waiting read holds an xmin";
    preloaded->exec("INSERT INTO n_long_poll (id, v) VALUES (1, 'a')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    // And it waits again, on the same connection.
    ASSERT_TRUE(cftest::eventually([&] { return long_poll_backend(*preloaded).first == waiting.first; }));
    p.stop();  // cancels the waiting read
    EXPECT_TRUE(cftest::eventually([&] { return long_poll_backend(*preloaded).first == 0; }));
    EXPECT_EQ(errors.load(), 0);  // the cancel is no error
}

// Without preloading no read can wait: the processor reads on notifications
// and delivers as before.
TEST(Notifier, NotPreloadedAProcessorFallsBackToNotifications) {
    make_table(*plain, "n_no_long_poll");
    cftest::Recorder rec;
    std::atomic<int> errors{0};
    auto o = cftest::fast_options("one");
    o.on_error = [&](const changefeed::ErrorInfo&) { ++errors; };
    auto p = changefeed::make_processor({plain->conninfo(), "n_no_long_poll"}, "listens", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    plain->exec("INSERT INTO n_no_long_poll (id, v) VALUES (1, 'a')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    EXPECT_EQ(long_poll_backend(*plain).first, 0);
    EXPECT_EQ(errors.load(), 0);
}

TEST(Notifier, PreloadedARolledBackTransactionSendsNothing) { rollback_sends_nothing(*preloaded, "pre"); }

TEST(Notifier, NotPreloadedARolledBackTransactionSendsNothing) { rollback_sends_nothing(*plain, "plain"); }

}  // namespace
