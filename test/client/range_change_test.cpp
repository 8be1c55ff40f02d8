// Changing the number of ranges under running processors
// (changefeed.alter(tbl, ranges => n)): the instances are fenced, take the new
// ranges with the checkpoints inherited from the old ones, and go on.  With
// writers writing all along, every version of every document is delivered,
// and per document the versions first arrive in the order they were written
// (redelivery after the fence is allowed, loss and disorder are not).
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("range_change", CF_TEST_PORT, true);

namespace {

// What the processors handled, and what on_error was told besides the fence
// (lease lost, on checkpoints sent while a range change fenced them).
struct Recorded {
    cftest::Recorder handled;
    cftest::ErrorLog errors;
    std::vector<cftest::Delivery> all() const { return handled.deliveries(); }
    int fenced() const { return static_cast<int>(errors.messages(changefeed::errc::lease_lost).size()); }
    std::vector<std::string> unexpected() const {
        std::vector<std::string> out;
        for (const auto& e : errors.all())
            if (e.code != make_error_code(changefeed::errc::lease_lost))
                out.push_back(e.code.message() + ": " + e.message);
        return out;
    }
};

int ranges_of(const std::string& table) {
    return cluster()
        .exec("SELECT ranges FROM changefeed.collections WHERE table_name = '" + table + "'::regclass")[0][0]
        .as<int>();
}

// Live leases of `processor` on `table`, per owner.
std::map<std::string, int> owners(const std::string& table, const std::string& processor) {
    std::map<std::string, int> out;
    for (const auto& row : cluster().exec("SELECT owner, count(*) FROM changefeed.leases WHERE table_name = '" + table +
                                          "'::regclass AND processor = '" + processor +
                                          "' AND owner IS NOT NULL AND live GROUP BY owner"))
        out[row[0].as<std::string>()] = row[1].as<int>();
    return out;
}

int held(const std::map<std::string, int>& o) {
    int n = 0;
    for (const auto& [who, k] : o) n += k;
    return n;
}

// Checks every version of every document was delivered and, per document,
// first delivered in order: when version v first arrives, 1 .. v-1 already have.
void expect_complete_and_ordered(const std::vector<cftest::Delivery>& all, const std::map<std::string, int>& final_v) {
    std::map<std::string, std::set<int>> seen;
    int disorder = 0;
    for (const auto& d : all) {
        auto& s = seen[d.doc];
        if (d.v < 1 || s.count(d.v)) continue;  // the insert before the start, or a redelivery
        if (static_cast<int>(s.size()) != d.v - 1) {
            if (++disorder <= 5)
                ADD_FAILURE() << "document " << d.doc << ": version " << d.v << " first delivered after " << s.size()
                              << " earlier versions (range " << d.range << ", " << d.instance << ")";
        }
        s.insert(d.v);
    }
    EXPECT_EQ(disorder, 0);
    int lost = 0;
    for (const auto& [doc, v] : final_v) {
        const auto& s = seen[doc];
        for (int i = 1; i <= v; ++i)
            if (!s.count(i) && ++lost <= 5) ADD_FAILURE() << "document " << doc << ": version " << i << " lost";
    }
    EXPECT_EQ(lost, 0);
}

// Runs writers that raise each document's v by one per update, `changes`
// alter() calls between them, and the given processors through it all.
void run_through_changes(const std::string& table, const std::vector<int>& changes,
                         const std::vector<std::string>& instances) {
    constexpr int kDocs = 120;
    cftest::create_table(cluster(), table, 4);
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, '0' FROM generate_series(1, " + std::to_string(kDocs) +
                   ") g");
    Recorded got;
    std::vector<std::unique_ptr<changefeed::Processor>> ps;
    for (const auto& name : instances) {
        auto o = cftest::fast_options(name);
        o.on_error = got.errors.sink();
        ps.push_back(std::make_unique<changefeed::Processor>(changefeed::make_processor(
            {cluster().conninfo(), table}, "through", got.handled.handler(), changefeed::AllVersionsOptions(o))));
        ps.back()->start();
    }
    ASSERT_TRUE(cftest::eventually([&] { return held(owners(table, "through")) == 4; }, 20s));

    // Two writers, transactions of several documents each, until told to stop.
    std::atomic<bool> writing{true};
    std::atomic<int> written{0};  // transactions committed
    std::vector<std::thread> writers;
    for (int w = 0; w < 2; ++w)
        writers.emplace_back([&, w] {
            pqxx::connection c(cluster().conninfo());
            int i = 0;
            while (writing) {
                pqxx::work tx(c);
                tx.exec("UPDATE " + table +
                        " SET v = (v::int + 1)::text WHERE id % 24 = " + std::to_string((2 * i++ + w) % 24));
                tx.commit();
                ++written;
                std::this_thread::sleep_for(5ms);
            }
        });
    // The writers wrote and the instances handled a good deal more since
    // now: the feed flows under the present layout before it changes again.
    const auto flowing = [&] {
        const int w0 = written;
        const auto h0 = got.handled.size();
        return cftest::eventually([&] { return written >= w0 + 20 && got.handled.size() >= h0 + 50; }, 20s);
    };
    ASSERT_TRUE(flowing()) << "no changes flowed before the first change";
    for (int n : changes) {
        cluster().exec("SELECT changefeed.alter('" + table + "', ranges => " + std::to_string(n) + ")");
        ASSERT_EQ(ranges_of(table), n);
        // The instances take every new range again, while the writers write.
        EXPECT_TRUE(cftest::eventually([&] { return held(owners(table, "through")) == n; }, 20s))
            << "the ranges were not all taken again after the change to " << n;
        EXPECT_TRUE(flowing()) << "no changes flowed after the change to " << n;
    }
    writing = false;
    for (auto& t : writers) t.join();

    std::map<std::string, int> final_v;
    for (const auto& row : cluster().exec("SELECT id::text, v::int FROM " + table))
        final_v[row[0].as<std::string>()] = row[1].as<int>();
    ASSERT_TRUE(cftest::eventually(
        [&] {
            std::map<std::string, std::set<int>> seen;
            for (const auto& d : got.all()) seen[d.doc].insert(d.v);
            for (const auto& [doc, v] : final_v)
                if (v > 0 && !seen[doc].count(v)) return false;
            return true;
        },
        30s))
        << "the last versions were not all delivered";
    expect_complete_and_ordered(got.all(), final_v);

    // The ranges handed to the handler after the last change are the new ones.
    const int last = changes.back();
    for (const auto& p : ps) {
        for (int r : p->owned_ranges()) EXPECT_LT(r, last);
        EXPECT_EQ(p->state(), changefeed::State::running);
    }
    // What on_error was told: the fence (lease lost, on checkpoints sent
    // while a change ran), nothing else.
    std::printf("fenced checkpoints reported: %d\n", got.fenced());
    for (const auto& e : got.unexpected()) ADD_FAILURE() << "on_error: " << e;
    for (auto& p : ps) p->stop();
    cluster().exec("SELECT changefeed.disable('" + table + "', forget => true)");
}

}  // namespace

TEST(RangeChange, OneInstanceThroughSplitsAndMergesWhileWritersWrite) {
    // 4 -> 8 (split: exact inheritance), -> 3 (merge: the oldest), -> 6 (split).
    run_through_changes("rc_one", {8, 3, 6}, {"solo"});
}

TEST(RangeChange, TwoInstancesThroughSplitsAndMergesWhileWritersWrite) {
    run_through_changes("rc_two", {16, 5}, {"a", "b"});
}

TEST(RangeChange, ACheckpointOfTheOldLayoutIsFencedAndTheNewRangesInheritIt) {
    const std::string table = "rc_fence";
    cftest::create_table(cluster(), table, 2);
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, '1' FROM generate_series(1, 50) g");
    Recorded got;
    auto o = cftest::fast_options("only");
    o.on_error = got.errors.sink();
    // Started from the beginning of the log is not possible; start, then write.
    changefeed::Processor p = changefeed::make_processor({cluster().conninfo(), table}, "fence", got.handled.handler(),
                                                         changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    cluster().exec("UPDATE " + table + " SET v = '2'");
    ASSERT_TRUE(cftest::eventually([&] { return got.all().size() >= 50; }, 20s));
    // Every range checkpointed past the update: after the split, nothing is due again.
    ASSERT_TRUE(cftest::eventually(
        [&] {
            return cluster()
                       .exec("SELECT count(*) FROM changefeed.leases l, LATERAL changefeed.read('" + table +
                             "', l.checkpoint, 1000, ARRAY[l.range_id]) WHERE l.table_name = '" + table +
                             "'::regclass AND l.processor = 'fence'")[0][0]
                       .as<int>() == 0;
        },
        20s));
    const auto before = got.all().size();
    cluster().exec("SELECT changefeed.alter('" + table + "', ranges => 4)");
    ASSERT_TRUE(cftest::wait_running(p, 4));
    // A split inherits exactly: no redelivery at all.  A change in every new
    // range proves it: once those arrived, a redelivery would have come first.
    cluster().exec("UPDATE " + table + " SET v = '3'");
    ASSERT_TRUE(cftest::eventually([&] { return got.all().size() >= before + 50; }, 20s));
    std::size_t not_new = 0;
    for (const auto& d : got.all()) not_new += d.v != 3;
    EXPECT_EQ(not_new, before);
    std::set<int> ranges;
    for (const auto& d : got.all())
        if (d.v == 3) ranges.insert(d.range);
    EXPECT_EQ(ranges.size(), 4u);
    p.stop();
    cluster().exec("SELECT changefeed.disable('" + table + "', forget => true)");
}
