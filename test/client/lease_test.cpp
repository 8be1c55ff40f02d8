// Leases: instances under one name split the ranges and handle each change
// once; stop() hands the leases over at once; a fenced instance cannot move
// the checkpoint.
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <condition_variable>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("lease", CF_TEST_PORT, true);

namespace {

changefeed::Processor make(const std::string& table, const std::string& name, changefeed::Handler h,
                           changefeed::ProcessorOptions o) {
    return changefeed::make_processor(changefeed::Collection(cluster().conninfo(), table), name, std::move(h),
                                      std::move(o));
}

TEST(Leases, ThreeInstancesShareSixteenRangesAndHandleEachChangeOnce) {
    cftest::create_table(cluster(), "ls_three", 16);
    cftest::Recorder rec;
    std::vector<changefeed::Processor> ps;
    for (const char* name : {"a", "b", "c"}) {
        auto o = cftest::fast_options(name);
        o.lease_duration = 20s;  // no expiry while healthy, even on a loaded machine
        o.renew_interval = 2s;
        ps.push_back(make("ls_three", "shared", rec.handler(), o));
    }
    for (auto& p : ps) p.start();
    // Balanced: every range owned once, shares differ by at most one (6/5/5).
    ASSERT_TRUE(cftest::eventually([&] {
        std::set<int> all;
        std::size_t lo = 16, hi = 0, total = 0;
        for (auto& p : ps) {
            auto r = p.owned_ranges();
            all.insert(r.begin(), r.end());
            lo = std::min(lo, r.size());
            hi = std::max(hi, r.size());
            total += r.size();
        }
        return all.size() == 16 && total == 16 && hi - lo <= 1;
    }));
    for (int t = 0; t < 10; ++t)
        cluster().exec("INSERT INTO ls_three (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(t * 30 + 1) +
                       ", " + std::to_string(t * 30 + 30) + ") g");
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 300; }));
    // A duplicate would come before the marker of its range.
    ASSERT_FALSE(cftest::deliver_markers(cluster(), "ls_three", 1000, rec).empty());
    for (const auto& [doc, n] : rec.counts()) EXPECT_EQ(n, 1) << "doc " << doc;
    std::set<std::string> instances;
    for (const auto& h : rec.all()) instances.insert(h.context.instance);
    EXPECT_EQ(instances.size(), 3u);
    for (auto& p : ps) p.stop();
    auto owned = cluster().exec(
        "SELECT count(*) FROM changefeed.leases WHERE table_name = 'ls_three'::regclass AND owner IS NOT NULL");
    EXPECT_EQ(owned[0][0].as<int>(), 0);  // stop() released them
}

TEST(Leases, StopHandsTheLeasesOverWithoutWaitingForExpiry) {
    cftest::create_table(cluster(), "ls_stop", 8);
    cftest::Recorder ra, rb;
    auto oa = cftest::fast_options("a");
    auto ob = cftest::fast_options("b");
    // Far longer than the test waits: only a release explains a takeover.
    oa.lease_duration = ob.lease_duration = 600s;
    auto a = make("ls_stop", "handover", ra.handler(), oa);
    auto b = make("ls_stop", "handover", rb.handler(), ob);
    a.start();
    ASSERT_TRUE(cftest::wait_running(a, 8));
    b.start();
    ASSERT_TRUE(cftest::wait_running(b, 4));
    a.stop();
    ASSERT_TRUE(cftest::wait_running(b, 8, 20s));
    cluster().exec("INSERT INTO ls_stop (id, v) SELECT g, 'x' FROM generate_series(1, 40) g");
    ASSERT_TRUE(cftest::eventually([&] { return rb.counts().size() == 40; }, 20s));
}

TEST(Leases, AFencedInstanceCannotCheckpoint) {
    cftest::create_table(cluster(), "ls_fence", 1);
    std::mutex mu;
    std::condition_variable cv;
    bool entered = false, release = false;
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("slow");
    o.lease_duration = 600s;
    o.renew_interval = 100s;
    o.on_error = errors.sink();
    auto p = make(
        "ls_fence", "fenced",
        [&](const std::vector<changefeed::Change>&, const changefeed::Context&) {
            std::unique_lock lock(mu);
            entered = true;
            cv.notify_all();
            cv.wait(lock, [&] { return release; });
        },
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1));
    auto before = cluster().exec("SELECT checkpoint, epoch FROM changefeed.leases WHERE table_name = "
                                 "'ls_fence'::regclass AND processor = 'fenced'");
    cluster().exec("INSERT INTO ls_fence (id) VALUES (1)");
    {
        std::unique_lock lock(mu);
        ASSERT_TRUE(cv.wait_for(lock, 20s, [&] { return entered; }));
    }
    // Another instance takes the lease while the handler runs.
    cluster().exec("SELECT changefeed.lease_steal('ls_fence', 'fenced', 0, 'intruder', 'slow', '1 hour')");
    {
        std::lock_guard lock(mu);
        release = true;
    }
    cv.notify_all();
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(changefeed::errc::lease_lost); }));
    for (const auto& e : errors.all())
        if (e.code == changefeed::errc::lease_lost) {
            ASSERT_TRUE(e.range_id.has_value());
            EXPECT_EQ(*e.range_id, 0);
        }
    auto after = cluster().exec("SELECT checkpoint, epoch, owner FROM changefeed.leases WHERE table_name = "
                                "'ls_fence'::regclass AND processor = 'fenced'");
    EXPECT_EQ(after[0][0].as<std::string>(), before[0][0].as<std::string>());
    EXPECT_EQ(after[0][1].as<long>(), before[0][1].as<long>() + 1);
    EXPECT_EQ(after[0][2].as<std::string>(), "intruder");
    EXPECT_TRUE(cftest::eventually([&] { return p.owned_ranges().empty(); }));
    p.stop();
    // The lease is the intruder's; stop() released only what it owned.
    auto owner = cluster().exec("SELECT owner FROM changefeed.leases WHERE table_name = "
                                "'ls_fence'::regclass AND processor = 'fenced'");
    EXPECT_EQ(owner[0][0].as<std::string>(), "intruder");
}

TEST(Leases, AcquireBalancesInSql) {
    cftest::create_table(cluster(), "ls_sql", 16);
    cluster().exec("SELECT changefeed.lease_init('ls_sql', 'p')");
    auto take = [](const std::string& who) {
        return cluster()
            .exec("SELECT count(*) FROM changefeed.lease_acquire('ls_sql', 'p', '" + who + "', '1 hour')")[0][0]
            .as<int>();
    };
    EXPECT_EQ(take("a"), 16);
    // A newcomer steals one lease per step until the shares are even.
    int b = 0;
    for (int i = 0; i < 20; ++i) b = take("b");
    EXPECT_EQ(b, 8);
    EXPECT_EQ(take("a"), 8);
    auto epochs = cluster().exec("SELECT min(epoch), max(epoch) FROM changefeed.leases WHERE table_name = "
                                 "'ls_sql'::regclass AND owner = 'b'");
    EXPECT_EQ(epochs[0][0].as<int>(), 2);  // every change of owner bumped the epoch
}

}  // namespace
