// A subscription cancelled, or destroyed, from inside its own callback: the
// callback finishes on live state, nothing more is delivered, and the rest of
// the process (other subscriptions of the same hub) goes on.  Run under
// AddressSanitizer too (test/run-all.sh), which reports any use of freed state.
#include "support/cluster.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("cancel_in_callback", CF_TEST_PORT, true);

namespace {

changefeed::Collection coll(const std::string& table) { return {cluster().conninfo(), table}; }

changefeed::SubscriptionOptions fast() {
    changefeed::SubscriptionOptions o;
    o.poll_interval = 200ms;
    return o;
}

// Something a callback holds, to tell when the subscription's state (its
// callback with it) was freed: last of all by the dispatcher, once it
// returned, after which nothing can call the callback again.
struct Held {
    std::shared_ptr<int> in_callback = std::make_shared<int>(0);
    std::weak_ptr<int> watched = in_callback;
    bool freed() const { return watched.expired(); }
};

void insert(const std::string& table, int from, int to) {
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(from) +
                   ", " + std::to_string(to) + ") g");
}

TEST(CancelInCallback, CancelFromTheCallbackStopsDeliveryAndKeepsStateAlive) {
    cftest::create_table(cluster(), "cc_cancel", 4);
    // A neighbour on the same hub, which must go on after the cancel.
    std::atomic<int> neighbour{0};
    auto other = changefeed::subscribe(
        coll("cc_cancel"), [&](const changefeed::Change&, const changefeed::Context&) { ++neighbour; }, fast());
    for (int round = 0; round < 5; ++round) {
        std::mutex mu;
        std::optional<changefeed::Subscription> sub;
        std::atomic<int> calls{0}, after_cancel{0};
        std::atomic<bool> returned{false};
        Held held;
        {
            std::lock_guard lock(mu);
            sub = changefeed::subscribe(
                coll("cc_cancel"),
                [&, keep = std::move(held.in_callback)](const changefeed::Change&, const changefeed::Context& ctx) {
                    if (++calls > 1) ++after_cancel;
                    {
                        std::lock_guard lock(mu);
                        sub->cancel();
                    }
                    EXPECT_TRUE(ctx.stop.stop_requested());  // the token of the cancelled subscription
                    std::this_thread::sleep_for(20ms);       // still running while cancel() has returned
                    returned = true;
                },
                fast());
        }
        insert("cc_cancel", round * 100 + 1, round * 100 + 50);  // a queue of 50 waits behind the first
        ASSERT_TRUE(cftest::eventually([&] { return returned.load(); }));
        ASSERT_TRUE(cftest::eventually([&] { return held.freed(); })) << "the dispatcher did not end";
        EXPECT_EQ(calls.load(), 1);
        EXPECT_EQ(after_cancel.load(), 0);
        std::lock_guard lock(mu);
        EXPECT_FALSE(sub->active());
    }
    ASSERT_TRUE(cftest::eventually([&] { return neighbour.load() == 250; }));
    EXPECT_TRUE(other.active());
}

TEST(CancelInCallback, DestroyingTheSubscriptionFromItsCallback) {
    cftest::create_table(cluster(), "cc_destroy", 4);
    std::mutex mu;
    auto sub = std::make_unique<changefeed::Subscription>();
    std::atomic<int> calls{0};
    std::atomic<bool> returned{false};
    Held held;
    {
        std::lock_guard lock(mu);
        *sub = changefeed::subscribe(
            coll("cc_destroy"),
            [&, keep = std::move(held.in_callback)](const changefeed::Change&, const changefeed::Context&) {
                ++calls;
                std::unique_ptr<changefeed::Subscription> gone;
                {
                    std::lock_guard lock(mu);
                    gone = std::move(sub);
                }
                gone.reset();  // ~Subscription from inside its own callback
                std::this_thread::sleep_for(20ms);
                returned = true;
            },
            fast());
    }
    insert("cc_destroy", 1, 30);
    ASSERT_TRUE(cftest::eventually([&] { return returned.load(); }));
    ASSERT_TRUE(cftest::eventually([&] { return held.freed(); })) << "the dispatcher did not end";
    EXPECT_EQ(calls.load(), 1);
    // The hub is still usable for new subscriptions.
    std::atomic<int> later{0};
    auto again = changefeed::subscribe(
        coll("cc_destroy"), [&](const changefeed::Change&, const changefeed::Context&) { ++later; }, fast());
    insert("cc_destroy", 31, 40);
    EXPECT_TRUE(cftest::eventually([&] { return later.load() == 10; }));
}

}  // namespace
