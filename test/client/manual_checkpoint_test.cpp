// CheckpointMode::manual: the processor stores no checkpoint of its own --
// not after a batch, not while idle, not on stop -- and reads on from where
// its last batch ended; Context::checkpoint stores a batch's position, from
// any thread, also after the handler returned; an older one is ignored.
#include "support/caught_up.hpp"
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <mutex>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("manual_checkpoint", CF_TEST_PORT, true);

namespace {

changefeed::LatestVersionOptions manual_options(int batch = 100) {
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.checkpoint_mode = changefeed::CheckpointMode::manual;
    o.idle_checkpoint_interval = 1ms;  // would store at once if manual mode did not forbid it
    o.max_batch_size = batch;
    return o;
}

std::string stored_checkpoint(const std::string& table) {
    return cluster()
        .exec("SELECT checkpoint FROM changefeed.leases WHERE table_name = '" + table + "'::regclass")[0][0]
        .as<std::string>();
}

TEST(ManualCheckpoint, NothingIsStoredWithoutACallAndARestartRedelivers) {
    cftest::create_table(cluster(), "mc_none", 1);
    changefeed::Collection coll(cluster().conninfo(), "mc_none");
    cftest::Recorder first;
    std::vector<std::string> positions;
    std::mutex mu;
    {
        auto o = manual_options();
        auto idle = std::make_shared<cftest::CaughtUp>();
        o.metrics = idle;
        auto p = changefeed::make_processor(
            coll, "mc",
            [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
                first.add(batch, ctx);
                std::lock_guard lock(mu);
                positions.push_back(ctx.position);
                EXPECT_TRUE(static_cast<bool>(ctx.checkpoint));
            },
            o);
        p.start();
        ASSERT_TRUE(cftest::wait_running(p, 1u));
        const std::string initial = stored_checkpoint("mc_none");
        cluster().exec("INSERT INTO mc_none (id, v) SELECT g, 'x' FROM generate_series(1, 5) g");
        ASSERT_TRUE(cftest::eventually([&] { return first.counts().size() == 5; }));
        cluster().exec("INSERT INTO mc_none (id, v) VALUES (6, 'x')");
        ASSERT_TRUE(cftest::eventually([&] { return first.counts().size() == 6; }));
        // Idle reads past the idle checkpoint interval: three more that found
        // nothing, so two whole idle steps after the last batch.
        const auto reads = idle->empty_reads();
        ASSERT_TRUE(cftest::eventually([&] { return idle->empty_reads() >= reads + 3; }));
        for (const auto& [doc, n] : first.counts()) EXPECT_EQ(n, 1) << doc;  // it read on, not from the stored one
        EXPECT_EQ(stored_checkpoint("mc_none"), initial);
        p.stop();
        EXPECT_EQ(stored_checkpoint("mc_none"), initial);  // not on stop either
    }
    {
        std::lock_guard lock(mu);
        for (const auto& pos : positions) EXPECT_FALSE(pos.empty());
    }
    cftest::Recorder second;
    auto p = changefeed::make_processor(coll, "mc", second.handler(), manual_options());
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return second.counts().size() == 6; }));  // everything again
}

TEST(ManualCheckpoint, ACheckpointCalledFromAnotherThreadAfterTheHandlerIsStored) {
    cftest::create_table(cluster(), "mc_later", 1);
    changefeed::Collection coll(cluster().conninfo(), "mc_later");
    std::mutex mu;
    std::vector<changefeed::Context> contexts;
    std::vector<std::string> ids;
    {
        auto p = changefeed::make_processor(
            coll, "mc",
            [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
                std::lock_guard lock(mu);
                contexts.push_back(ctx);
                for (const auto& c : batch) ids.push_back(c.doc_id);
            },
            manual_options(2));
        p.start();
        ASSERT_TRUE(cftest::wait_running(p, 1u));
        cluster().exec("INSERT INTO mc_later (id, v) SELECT g, 'x' FROM generate_series(1, 6) g");  // three batches
        ASSERT_TRUE(cftest::eventually([&] {
            std::lock_guard lock(mu);
            return ids.size() == 6;
        }));
        std::vector<changefeed::Context> got;
        {
            std::lock_guard lock(mu);
            got = contexts;
        }
        ASSERT_EQ(got.size(), 3u);
        // The service confirms the second batch, from a thread of its own.
        std::thread([&] { got[1].checkpoint(); }).join();
        EXPECT_EQ(stored_checkpoint("mc_later"), got[1].position);
        got[0].checkpoint();  // older: ignored
        EXPECT_EQ(stored_checkpoint("mc_later"), got[1].position);
        p.stop();
    }
    // A restart resumes after the second batch: only the third comes again.
    cftest::Recorder again;
    auto o = manual_options(2);
    auto idle = std::make_shared<cftest::CaughtUp>();
    o.metrics = idle;
    auto p = changefeed::make_processor(coll, "mc", again.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return again.counts().size() == 2; }));
    // Nothing more: a read after that batch found nothing waiting.
    const auto reads = idle->empty_reads();
    ASSERT_TRUE(cftest::eventually([&] { return idle->empty_reads() > reads; }));
    std::set<std::string> redelivered;
    for (const auto& [doc, n] : again.counts()) redelivered.insert(doc);
    EXPECT_EQ(redelivered, (std::set<std::string>{"5", "6"}));
    // The range changed hands: the old batch's checkpoint is refused.
    p.stop();
    cluster().exec("SELECT changefeed.reset_checkpoint('mc_later', 'mc')");
    std::vector<changefeed::Context> old;
    {
        std::lock_guard lock(mu);
        old = contexts;
    }
    EXPECT_EQ(cftest::code_of([&] { old[2].checkpoint(); }), make_error_code(changefeed::errc::lease_lost));
}

}  // namespace
