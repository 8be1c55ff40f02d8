// The bridge into NATS JetStream under faults: the bridge's process is
// SIGKILLed and restarted twice, nats-server is restarted once and the
// bridge's database sessions are cut once, while writers write; the stream
// still holds exactly the committed changes, in per-document order, the
// redeliveries dropped by the duplicate window.
#include "support/child.hpp"
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/nats_server.hpp"
#include "support/stream_check.hpp"

#include <atomic>
#include <fstream>
#include <sstream>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("nats_fault", CF_TEST_PORT, true);

namespace {

cftest::ChildProcess bridge_runner(const std::string& table, const std::string& instance, const std::string& url,
                                   const std::string& stats) {
    return cftest::ChildProcess({CF_BRIDGE_RUNNER, cluster().conninfo(), table, "to-nats", instance, url, "fault",
                                 "FAULT", stats, "--batch", "50", "--hold-ms", "40"});
}

// What the runners wrote to STATS: acknowledged, of which duplicates, failed publishes.
struct RunnerStats {
    std::int64_t acked = 0, duplicates = 0, failures = 0;
};

RunnerStats read_stats(const std::string& path) {
    RunnerStats s;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream l(line);
        std::string what;
        l >> what;
        if (what == "ok") {
            std::int64_t a = 0, d = 0;
            l >> a >> d;
            s.acked += a;
            s.duplicates += d;
        } else if (what == "fail") {
            ++s.failures;
        }
    }
    return s;
}

TEST(NatsFaults, KilledBridgesAndARestartedBrokerLoseAndInventNothing) {
    cftest::NatsServer nats("fault", CF_NATS_PORT);
    nats.start();
    const std::string table = "nf_fault";
    cftest::create_table(cluster(), table, 8);
    const std::string stats = cftest::test_file("stats");

    // The bridge starts first: a processor without checkpoints starts at its
    // first start, so the writes must come after its leases exist.
    int kills = 0, broker_restarts = 0;
    auto first = bridge_runner(table, "b1", nats.url(), stats);
    ASSERT_TRUE(first.running());
    ASSERT_TRUE(cftest::eventually([&] {
        return cluster()
                   .exec("SELECT count(*) FROM changefeed.leases WHERE table_name = '" + table +
                         "'::regclass AND processor = 'to-nats' AND owner = 'b1'")[0][0]
                   .as<int>() == 8;
    }));

    // Writers: 1600 transactions, each a new document and a replace of an
    // older one, every 25th a delete: about 3200 changes over several seconds.
    std::atomic<bool> writing{true};
    std::atomic<int> writer_pid{0};
    std::thread writer([&] {
        pqxx::connection c(cluster().conninfo());
        writer_pid = c.backendpid();
        for (int t = 1; t <= 1600; ++t) {
            pqxx::work w(c);
            w.exec("INSERT INTO " + table + " (id, v) VALUES (" + std::to_string(t) + ", 'new')");
            w.exec("UPDATE " + table + " SET v = 'v" + std::to_string(t) + "' WHERE id = " + std::to_string(t / 2));
            if (t % 25 == 0) w.exec("DELETE FROM " + table + " WHERE id = " + std::to_string(t - 10));
            w.commit();
            std::this_thread::sleep_for(3ms);
        }
        writing = false;
    });

    // Each fault lands once the bridge made progress since the last one (what
    // the runners recorded as acknowledged, or as failed), not after a pause:
    // on a slow machine the faults still fall among the writes.
    auto acked_grows = [&](std::int64_t by) {
        const auto from = read_stats(stats).acked;
        return cftest::eventually([&] { return read_stats(stats).acked >= from + by; }, 60s);
    };
    ASSERT_TRUE(acked_grows(300)) << "the first bridge published nothing";
    first.kill_hard();
    ++kills;
    auto second = bridge_runner(table, "b2", nats.url(), stats);
    ASSERT_TRUE(acked_grows(300)) << "the second bridge published nothing";
    const auto failures = read_stats(stats).failures;
    nats.stop();
    // Publishes fail meanwhile.
    ASSERT_TRUE(cftest::eventually([&] { return read_stats(stats).failures > failures; }));
    nats.start();
    ++broker_restarts;
    ASSERT_TRUE(acked_grows(100)) << "the second bridge published nothing after the broker's restart";
    // Its database sessions (leases, reads, checkpoints) are cut while it
    // publishes: it reconnects and republishes what it had not checkpointed.
    const int db_cuts = cluster()
                            .exec("SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
                                  " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
                                  "   AND pid <> " +
                                  std::to_string(writer_pid.load()))[0][0]
                            .as<int>();
    EXPECT_GE(db_cuts, 1);
    ASSERT_TRUE(acked_grows(100)) << "the second bridge published nothing after its sessions were cut";
    second.kill_hard();
    ++kills;
    auto third = bridge_runner(table, "b3", nats.url(), stats);
    writer.join();
    EXPECT_FALSE(writing);

    auto committed = cftest::committed_changes(cluster(), table);
    ASSERT_GT(committed.size(), 3000u);
    // Wait for the last change to arrive (the killed instances' leases expire first).
    std::vector<cftest::StoredMessage> stored;
    auto complete = [&] {
        if (cftest::stream_size(nats.url(), "FAULT") < committed.size()) return false;
        stored = cftest::read_stream(nats.url(), "FAULT");
        return cftest::check_stream(committed, stored).lost == 0;
    };
    if (!cftest::eventually(complete, 60s)) {
        stored = cftest::read_stream(nats.url(), "FAULT");
        std::string lag;
        for (auto row :
             cluster().exec("SELECT range_id, owner, live, pending FROM changefeed.lag('" + table + "', 'to-nats')"))
            lag += " [" + row[0].as<std::string>() + " " + row[1].as<std::string>("-") + " " +
                   row[2].as<std::string>() + " " + row[3].as<std::string>() + "]";
        FAIL() << cftest::check_stream(committed, stored) << " lag:" << lag;
    }
    // Anything extra (a redelivery the window let through) would be stored
    // before the marker of its range: one in every range, awaited in the stream.
    std::set<std::string> docs;
    auto stored_doc = [&](const std::string& id) {
        if (!docs.count(id))
            for (const auto& m : cftest::read_stream(nats.url(), "FAULT"))
                if (auto d = m.headers.find("Changefeed-Doc"); d != m.headers.end()) docs.insert(d->second);
        return docs.count(id) > 0;
    };
    ASSERT_FALSE(cftest::deliver_markers(cluster(), table, 100000, stored_doc, 60s).empty());
    committed = cftest::committed_changes(cluster(), table);
    stored = cftest::read_stream(nats.url(), "FAULT");
    third.kill_hard();

    auto r = cftest::check_stream(committed, stored);
    auto s = read_stats(stats);
    std::cout << "nats-fault: changes=" << r.changes << " stored=" << r.stored << " duplicates_dropped=" << s.duplicates
              << " publish_failures=" << s.failures << " kills=" << kills << " broker_restarts=" << broker_restarts
              << " db_cuts=" << db_cuts << "\n";
    EXPECT_TRUE(r.ok()) << r;
    EXPECT_EQ(r.stored, r.changes) << "the window dropped every redelivery: " << r;
    EXPECT_EQ(r.distinct, r.changes);
    EXPECT_EQ(r.lost, 0u);
    EXPECT_EQ(r.invented, 0u);
    EXPECT_EQ(r.misordered, 0u);
    EXPECT_GE(s.failures, 1) << "the broker's restart failed publishes";
    // The runners hold each confirmed batch 40 ms before its checkpoint, so a
    // kill usually lands there and the next runner republishes the batch: the
    // count above says how many the window dropped.  Whether a kill lands in
    // that gap is timing (a loaded machine may miss it), so it is reported,
    // not asserted; nothing stored twice is asserted above, and
    // nats_bridge_test proves the window drops a republished batch.
    // Every acknowledgement the runners recorded is a stored message or a dropped duplicate.
    EXPECT_LE(s.acked - s.duplicates, static_cast<std::int64_t>(r.stored));
}

}  // namespace
