// Balancing: instances started together split the ranges evenly after their
// first acquire steps; a joining instance takes its share, and a stopped or
// killed one's ranges are split by the rest, within a few of the instances'
// lease steps (plus the lease expiry for a killed one), moving many leases at
// once; lease notifications follow every move; no change is lost or handled
// out of order during the moves.  Steps are counted as rounds of renewals
// (support/lease_cycles.hpp), never as seconds.
#include "support/child.hpp"
#include "support/cluster.hpp"
#include "support/lease_cycles.hpp"
#include "support/recorder.hpp"

#include <atomic>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("balance", CF_TEST_PORT, true);

namespace {

constexpr auto kAcquire = 500ms;
constexpr auto kLease = 4s;

changefeed::ProcessorOptions options(const std::string& instance) {
    auto o = cftest::fast_options(instance);
    o.acquire_interval = kAcquire;
    o.lease_duration = kLease;
    o.renew_interval = 1s;
    return o;
}

std::map<std::string, int> split(const std::string& table, const std::string& processor) {
    std::map<std::string, int> out;
    for (const auto& row : cluster().exec("SELECT owner, count(*) FROM changefeed.leases WHERE table_name = '" + table +
                                          "'::regclass AND processor = '" + processor +
                                          "' AND owner IS NOT NULL AND live GROUP BY owner"))
        out[row[0].as<std::string>()] = row[1].as<int>();
    return out;
}

// Whether the live owners are exactly `who`, each holding between lo and hi.
bool split_is(const std::map<std::string, int>& s, const std::set<std::string>& who, int lo, int hi) {
    if (s.size() != who.size()) return false;
    for (const auto& [owner, n] : s)
        if (!who.count(owner) || n < lo || n > hi) return false;
    return true;
}

// What a lease notification says, per instance: ranges held now.
struct Notified {
    std::mutex mu;
    std::map<std::string, std::set<int>> held;
    int moves = 0;
    void hook(changefeed::ProcessorOptions& o) {
        const std::string who = o.instance_name;
        o.on_lease_acquired = [this, who](int r) {
            std::lock_guard lock(mu);
            held[who].insert(r);
            ++moves;
        };
        o.on_lease_released = [this, who](int r) {
            std::lock_guard lock(mu);
            held[who].erase(r);
        };
    }
    std::size_t of(const std::string& who) {
        std::lock_guard lock(mu);
        return held[who].size();
    }
};

}  // namespace

TEST(Balance, FourInstancesStartedTogetherSplitSixtyFourRangesAtOnce) {
    cftest::create_table(cluster(), "bl_start", 64);
    Notified notified;
    std::vector<changefeed::Processor> ps;
    for (const char* name : {"a", "b", "c", "d"}) {
        auto o = options(name);
        notified.hook(o);
        ps.push_back(changefeed::make_processor({cluster().conninfo(), "bl_start"}, "together",
                                                changefeed::Handler([](auto&&...) {}),
                                                changefeed::AllVersionsOptions(o)));
    }
    std::vector<std::thread> starts;
    for (auto& p : ps) starts.emplace_back([&p] { p.start(); });
    for (auto& t : starts) t.join();
    // Within the first few lease steps of each: no stealing one lease per step
    // (a, the first to start, would give up 48 leases, 12 to each other instance).
    const auto rounds = cftest::rounds_until(
        cluster(), "bl_start", "together", {"a", "b", "c", "d"}, kLease,
        [&] {
            return split_is(split("bl_start", "together"), {"a", "b", "c", "d"}, 16, 16);
        },
        3);
    ASSERT_TRUE(rounds && *rounds < 3) << (rounds ? "rounds of renewals: " + std::to_string(*rounds) : "no renewals");
    // The notifications agree with the leases.
    ASSERT_TRUE(cftest::eventually(
        [&] {
            for (const char* name : {"a", "b", "c", "d"})
                if (notified.of(name) != 16) return false;
            return true;
        },
        5s));
    // And it stays so: three more acquire steps of every instance move nothing.
    ASSERT_TRUE(cftest::lease_cycles(cluster(), "bl_start", "together", {"a", "b", "c", "d"}, kLease, 4));
    EXPECT_TRUE(split_is(split("bl_start", "together"), {"a", "b", "c", "d"}, 16, 16));
    for (auto& p : ps) EXPECT_EQ(p.owned_ranges().size(), 16u);
    for (auto& p : ps) p.stop();
}

TEST(Balance, JoinStopAndKillRebalanceWithinTwoIntervalsWithoutLossOrDisorder) {
    const std::string table = "bl_moves";
    cftest::create_table(cluster(), table, 64);
    constexpr int kDocs = 200;
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, '0' FROM generate_series(1, " + std::to_string(kDocs) +
                   ") g");
    Notified notified;
    cftest::Recorder got;
    // The killed instance runs in a child process and writes what it handles to a file.
    const std::string out = std::string(CF_TEST_DIR) + "-balance-victim.txt";
    std::remove(out.c_str());
    auto victim = cftest::processor_runner({cluster().conninfo(), table, "moves", "k", out, "--all-versions",
                                            "--acquire-ms", "500", "--lease-ms", "4000", "--renew-ms", "1000"});
    ASSERT_TRUE(victim.running());
    std::map<std::string, std::unique_ptr<changefeed::Processor>> ps;
    auto make = [&](const std::string& name) {
        auto o = options(name);
        notified.hook(o);
        ps[name] = std::make_unique<changefeed::Processor>(changefeed::make_processor(
            {cluster().conninfo(), table}, "moves", got.handler(), changefeed::AllVersionsOptions(o)));
        ps[name]->start();
    };
    for (const char* name : {"a", "b", "c"}) make(name);
    ASSERT_TRUE(cftest::eventually([&] { return split_is(split(table, "moves"), {"a", "b", "c", "k"}, 16, 16); }, 15s));

    // Writes go on through every move: each update raises a document's v by one.
    std::atomic<bool> writing{true};
    std::thread writer([&] {
        pqxx::connection c(cluster().conninfo());
        int i = 0;
        while (writing) {
            pqxx::work tx(c);
            tx.exec("UPDATE " + table + " SET v = (v::int + 1)::text WHERE id % 20 = " + std::to_string(i++ % 20));
            tx.commit();
            std::this_thread::sleep_for(20ms);
        }
    });
    // The moves start once updates flow to the handlers.
    auto updates_handled = [&] {
        std::size_t n = 0;
        for (const auto& d : got.deliveries()) n += d.v >= 1;
        return n;
    };
    ASSERT_TRUE(cftest::eventually([&] { return updates_handled() >= 20; }));

    // Each move settles within a few rounds of the other instances' renewals
    // (a round: each renewed once more, so each ran an acquire step in
    // between), whatever the machine's speed; printed, never asserted, in ms.
    auto settles = [&](const char* what, const std::set<std::string>& others, int max_rounds,
                       const std::function<bool()>& done) {
        const auto t0 = std::chrono::steady_clock::now();
        const auto rounds = cftest::rounds_until(cluster(), table, "moves", others, kLease, done, max_rounds);
        EXPECT_TRUE(rounds && *rounds < max_rounds)
            << what << ": " << (rounds ? "not within " + std::to_string(max_rounds) + " rounds" : "no renewals");
        std::printf(
            "rebalanced after %s: %d rounds, %lld ms\n", what, rounds ? *rounds : -1,
            static_cast<long long>(
                std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()));
    };

    // A fifth joins: 64/5, 12 or 13 each, in its first acquire steps (one
    // lease per step would take it twelve).
    make("e");
    settles("join", {"a", "b", "c", "k"}, 3, [&] {
        return split_is(split(table, "moves"), {"a", "b", "c", "k", "e"}, 12, 13);
    });

    // One stops (releases): the other four take its ranges, 16 each, each in
    // an acquire step.
    ps["b"]->stop();
    settles("stop", {"a", "c", "k", "e"}, 3, [&] {
        return split_is(split(table, "moves"), {"a", "c", "k", "e"}, 16, 16);
    });

    // One is killed: once its leases expired the other three split them (21
    // or 22).  The lease lasts four renew intervals of theirs, so four rounds
    // at least, and two acquire steps after it.
    victim.kill_hard();
    settles("kill", {"a", "c", "e"}, 4 + 4, [&] { return split_is(split(table, "moves"), {"a", "c", "e"}, 21, 22); });

    // Writes went on after the last move, and reach the new owners.
    const auto handled_after_moves = updates_handled();
    ASSERT_TRUE(cftest::eventually([&] { return updates_handled() >= handled_after_moves + 20; }));
    writing = false;
    writer.join();
    // Every version of every document is handled by someone.
    std::map<std::string, int> final_v;
    for (const auto& row : cluster().exec("SELECT id::text, v::int FROM " + table))
        final_v[row[0].as<std::string>()] = row[1].as<int>();
    auto delivered = [&] {
        std::vector<cftest::Delivery> all = got.deliveries();
        std::ifstream in(out);
        std::string line;
        while (std::getline(in, line)) {
            std::istringstream ls(line);
            cftest::Delivery d;
            std::string v;
            ls >> d.doc >> v >> d.range >> d.epoch;
            if (!ls) continue;  // a line cut by the kill
            d.instance = "k";
            d.v = v == "-" ? -1 : std::stoi(v);
            all.push_back(d);
        }
        return all;
    };
    ASSERT_TRUE(cftest::eventually(
        [&] {
            std::map<std::string, std::set<int>> seen;
            for (const auto& d : delivered()) seen[d.doc].insert(d.v);
            // v0 was inserted before the processors started; every update after it counts.
            for (const auto& [doc, v] : final_v) {
                const auto from = seen[doc].lower_bound(1);
                if (static_cast<int>(std::distance(from, seen[doc].end())) != v) return false;
            }
            return true;
        },
        30s))
        << "a version was lost";
    // Within one ownership of a range (instance, range, epoch), each document's
    // versions come in order, without repeats.
    std::map<std::tuple<std::string, int, std::int64_t, std::string>, int> last;
    int disorder = 0;
    for (const auto& d : delivered()) {
        auto key = std::make_tuple(d.instance, d.range, d.epoch, d.doc);
        auto it = last.find(key);
        if (it != last.end() && d.v != it->second + 1) ++disorder;
        last[key] = d.v;
    }
    EXPECT_EQ(disorder, 0);
    // The notifications followed every move: what each running instance was told it holds is what it owns.
    for (const char* name : {"a", "c", "e"}) {
        auto owned = ps[name]->owned_ranges();
        EXPECT_EQ(notified.of(name), owned.size()) << name;
    }
    for (auto& [name, p] : ps) p->stop();
    std::remove(out.c_str());
}
