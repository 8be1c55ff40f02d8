// A processor destroyed from inside its own handler: the process survives,
// the processor stops (on_state_change is told), its last checkpoint is
// stored and its leases are released at once -- on PostgreSQL and on the
// in-memory provider.  Run under AddressSanitizer too (test/run-all.sh).
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <changefeed/in_memory.hpp>

#include <atomic>
#include <memory>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("processor_self_destroy", CF_TEST_PORT, true);

namespace {

// What outlives the processor: the handler and the callbacks use only this.
struct Observed {
    std::mutex mu;
    std::unique_ptr<changefeed::Processor> processor;
    std::atomic<int> batches{0};
    std::atomic<std::size_t> first_batch{0};
    std::atomic<bool> handler_returned{false};
    std::atomic<bool> stopped{false};
    std::atomic<int> errors{0};

    changefeed::Handler handler() {
        return [this](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            if (++batches == 1) first_batch = batch.size();
            std::unique_ptr<changefeed::Processor> self;
            {
                std::lock_guard lock(mu);
                self = std::move(processor);
            }
            self.reset();  // ~Processor from inside its own handler
            EXPECT_TRUE(ctx.stop.stop_requested());
            std::this_thread::sleep_for(50ms);  // the processor's state must still be alive under us
            handler_returned = true;
        };
    }
    template <class O>
    void watch(O& o) {
        o.on_state_change = [this](changefeed::State s) {
            if (s == changefeed::State::stopped) stopped = true;
        };
        o.on_error = [this](const changefeed::ErrorInfo&) { ++errors; };
    }
};

int owned_leases(const std::string& table) {
    return cluster()
        .exec("SELECT count(*) FROM changefeed.leases WHERE table_name = '" + table +
              "'::regclass AND owner IS NOT NULL")[0][0]
        .as<int>();
}

TEST(ProcessorSelfDestroy, OnPostgresTheProcessorStopsAndReleasesItsLeases) {
    cftest::create_table(cluster(), "sd_pg", 4);
    Observed seen;
    auto o = cftest::fast_options("one");
    o.lease_duration = 60s;  // released by the stop, not by expiry
    o.renew_interval = 1s;
    seen.watch(o);
    {
        std::lock_guard lock(seen.mu);
        seen.processor = std::make_unique<changefeed::Processor>(changefeed::make_processor(
            changefeed::Collection(cluster().conninfo(), "sd_pg"), "self-destroy", seen.handler(), o));
        seen.processor->start();
    }
    ASSERT_TRUE(cftest::eventually([&] { return owned_leases("sd_pg") == 4; }));
    cluster().exec("INSERT INTO sd_pg (id, v) SELECT g, 'x' FROM generate_series(1, 40) g");
    ASSERT_TRUE(cftest::eventually([&] { return seen.handler_returned.load(); }));
    ASSERT_TRUE(cftest::eventually([&] { return seen.stopped.load(); }));
    EXPECT_TRUE(cftest::eventually([&] { return owned_leases("sd_pg") == 0; }, 5s));
    EXPECT_EQ(seen.batches.load(), 1);
    EXPECT_EQ(seen.errors.load(), 0);

    // The batch whose handler destroyed the processor returned, so it was
    // checkpointed: a successor does not get it again, and gets the rest.
    cftest::Recorder rec;
    auto next = changefeed::make_processor(changefeed::Collection(cluster().conninfo(), "sd_pg"), "self-destroy",
                                           rec.handler(), cftest::fast_options("two"));
    next.start();
    ASSERT_GT(seen.first_batch.load(), 0u);
    EXPECT_TRUE(cftest::eventually([&] { return rec.size() == 40 - seen.first_batch.load(); }));
    // Nothing of the first batch comes later: it would have come before the marker of its range.
    const auto markers = cftest::deliver_markers(cluster(), "sd_pg", 1000, rec);
    ASSERT_FALSE(markers.empty());
    EXPECT_EQ(rec.size(), 40 - seen.first_batch.load() + markers.size());
}

TEST(ProcessorSelfDestroy, InMemoryTheProcessorStops) {
    changefeed::InMemoryCollection coll;
    Observed seen;
    auto o = cftest::fast_options("one");
    seen.watch(o);
    {
        std::lock_guard lock(seen.mu);
        seen.processor = std::make_unique<changefeed::Processor>(
            changefeed::make_processor(coll, "self-destroy", seen.handler(), changefeed::AllVersionsOptions(o)));
        seen.processor->start();
    }
    coll.create({{"id", 1}, {"v", "x"}});
    ASSERT_TRUE(cftest::eventually([&] { return seen.handler_returned.load(); }));
    ASSERT_TRUE(cftest::eventually([&] { return seen.stopped.load(); }));
    coll.create({{"id", 2}, {"v", "y"}});
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(seen.batches.load(), 1);
}

}  // namespace
