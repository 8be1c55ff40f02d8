// The recovery policy: per situation resume or halt, a halt names its
// runbook, and without on_error failures still reach stderr.
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <atomic>
#include <stdexcept>

using changefeed::errc;
using changefeed::RecoveryDecision;
using changefeed::Situation;
using changefeed::State;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("recovery", CF_TEST_PORT, true);

namespace {

TEST(RecoveryDecisions, HaltNeedsARunbookAndAHaltedState) {
    EXPECT_THROW(RecoveryDecision::halt(State::stopped, ""), std::invalid_argument);
    EXPECT_THROW(RecoveryDecision::halt(State::running, "handler-failing"), std::invalid_argument);
    auto d = RecoveryDecision::halt(State::history_lost, "history-lost");
    EXPECT_TRUE(d.halts());
    EXPECT_EQ(d.state(), State::history_lost);
    EXPECT_EQ(changefeed::runbook_path(d.runbook()), "docs/runbooks/history-lost.md");
    EXPECT_FALSE(RecoveryDecision::resume().halts());
}

TEST(RecoveryDecisions, DefaultsFollowTheSituation) {
    auto decide = [](Situation s) { return changefeed::default_recovery(changefeed::Incident{s, {}, {}, {}, 1}); };
    EXPECT_FALSE(decide(Situation::connection_lost).halts());
    EXPECT_FALSE(decide(Situation::handler_failing).halts());
    EXPECT_EQ(decide(Situation::history_lost).state(), State::history_lost);
    EXPECT_EQ(decide(Situation::history_lost).runbook(), "history-lost");
    EXPECT_EQ(decide(Situation::collection_gone).state(), State::stopped);
    EXPECT_EQ(decide(Situation::collection_gone).runbook(), "collection-gone");
    EXPECT_EQ(decide(Situation::processor_owned_by_another_role).runbook(), "processor-owned-by-another-role");
}

// A policy that halts a range whose handler failed three times in a row: that
// range stops, its lease stays, the other range goes on.
TEST(Recovery, HandlerFailingHaltsItsRangeByPolicy) {
    const auto table = cftest::test_table("rec");
    cftest::create_table(cluster(), table, 2);
    std::vector<int> counts;
    std::mutex mu;
    changefeed::LatestVersionOptions o = cftest::fast_options("i");
    o.retry_delay = std::chrono::milliseconds(20);
    o.recovery = [&](const changefeed::Incident& i) {
        std::lock_guard lock(mu);
        if (i.situation == Situation::handler_failing) counts.push_back(i.consecutive_failures);
        if (i.situation == Situation::handler_failing && i.consecutive_failures >= 3)
            return RecoveryDecision::halt(State::stopped, "handler-failing");
        return changefeed::default_recovery(i);
    };
    cftest::ErrorLog errors;
    o.on_error = errors.sink();
    // Range of id 1 fails always; the other range's ids are delivered.
    const int poison_range = cluster().exec("SELECT changefeed.range_of('1', 2)")[0][0].as<int>();
    cftest::Recorder rec;
    auto p = changefeed::make_processor(
        {cluster().conninfo(), table}, "p",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            if (ctx.range_id == poison_range) throw std::runtime_error("cannot project");
            rec.add(batch, ctx);
        },
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    int others = 0;
    for (int id = 1; id <= 40; ++id) {
        cluster().exec("INSERT INTO " + table + " (id) VALUES (" + std::to_string(id) + ")");
        if (id > 1 && cluster().exec("SELECT changefeed.range_of('" + std::to_string(id) + "', 2)")[0][0].as<int>() !=
                          poison_range)
            ++others;
    }
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(errc::halted); }));
    EXPECT_TRUE(cftest::eventually([&] { return static_cast<int>(rec.size()) == others; }, std::chrono::seconds(5)))
        << rec.size() << " of " << others;
    EXPECT_EQ(p.state(), State::stopped);
    {
        std::lock_guard lock(mu);
        ASSERT_GE(counts.size(), 3u);
        EXPECT_EQ(counts[0], 1);
        EXPECT_EQ(counts[1], 2);
        EXPECT_EQ(counts[2], 3);
    }
    // The failure that halted names the runbook; the halted range keeps its lease.
    auto all = errors.all();
    bool runbook_named = false;
    for (const auto& e : all)
        if (e.code == errc::handler_failed && e.runbook == "docs/runbooks/handler-failing.md") runbook_named = true;
    EXPECT_TRUE(runbook_named);
    EXPECT_EQ(p.owned_ranges().size(), 2u);
    const auto failures_at_halt = errors.messages(errc::handler_failed).size();
    // No more retries, through wake-ups and reads in both ranges (a marker in
    // each, handled by a witness) and many retry delays.
    ASSERT_TRUE(cftest::witness_rounds(cluster(), table, 1000));
    EXPECT_EQ(errors.messages(errc::handler_failed).size(), failures_at_halt);
    EXPECT_FALSE(rec.has("1"));
    p.stop();
}

// The default for a dropped or disabled table: halt(stopped, "collection-gone"),
// and the leases are given up.
TEST(Recovery, CollectionGoneHaltsWithItsRunbook) {
    const auto table = cftest::test_table("rec");
    cftest::create_table(cluster(), table, 2);
    cftest::ErrorLog errors;
    changefeed::LatestVersionOptions o = cftest::fast_options("i");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor({cluster().conninfo(), table}, "p", cftest::noop_handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    cluster().exec("SELECT changefeed.disable('" + table + "')");
    cluster().exec("INSERT INTO " + table + " (id) VALUES (1)");
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(errc::halted); }));
    EXPECT_TRUE(cftest::eventually([&] { return p.state() == State::stopped; }));
    bool runbook_named = false;
    for (const auto& e : errors.all())
        if (e.code == errc::collection_not_enabled && e.runbook == "docs/runbooks/collection-gone.md")
            runbook_named = true;
    EXPECT_TRUE(runbook_named);
    EXPECT_TRUE(cftest::eventually([&] { return p.owned_ranges().empty(); }));
    p.stop();
}

// A policy that throws decides nothing: the defaults stand (handler failures retried).
TEST(Recovery, ThrowingPolicyFallsBackToDefaults) {
    const auto table = cftest::test_table("rec");
    cftest::create_table(cluster(), table, 1);
    std::atomic<int> calls{0};
    changefeed::LatestVersionOptions o = cftest::fast_options("i");
    o.retry_delay = std::chrono::milliseconds(20);
    o.recovery = [](const changefeed::Incident&) -> RecoveryDecision { throw std::runtime_error("broken policy"); };
    o.on_error = [](const changefeed::ErrorInfo&) {};
    auto p = changefeed::make_processor(
        {cluster().conninfo(), table}, "p",
        [&](const std::vector<changefeed::Change>&, const changefeed::Context&) {
            if (++calls < 3) throw std::runtime_error("transient");
        },
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1));
    cluster().exec("INSERT INTO " + table + " (id) VALUES (1)");
    EXPECT_TRUE(cftest::eventually([&] { return calls.load() >= 3; }));
    EXPECT_EQ(p.state(), State::running);
    p.stop();
}

// Without on_error a failure is not silent: one line on stderr.
TEST(Recovery, FailuresGoToStderrWithoutOnError) {
    const auto table = cftest::test_table("rec");
    cftest::create_table(cluster(), table, 1);
    std::atomic<int> calls{0};
    changefeed::LatestVersionOptions o = cftest::fast_options("i");
    o.retry_delay = std::chrono::milliseconds(20);
    testing::internal::CaptureStderr();
    {
        auto p = changefeed::make_processor(
            {cluster().conninfo(), table}, "p",
            [&](const std::vector<changefeed::Change>&, const changefeed::Context&) {
                if (++calls == 1) throw std::runtime_error("projection store unavailable");
            },
            o);
        p.start();
        cftest::wait_running(p, 1);
        cluster().exec("INSERT INTO " + table + " (id) VALUES (1)");
        cftest::eventually([&] { return calls.load() >= 2; });
        p.stop();
    }
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("changefeed: "), std::string::npos) << err;
    EXPECT_NE(err.find("projection store unavailable"), std::string::npos) << err;
}

}  // namespace
