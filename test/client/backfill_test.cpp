// start_from_beginning: a checkpointed keyset backfill of the table's current
// rows, then the log from the backfill's position; interrupted (stop or
// SIGKILL) it resumes from its last key and loses nothing.
#include "support/child.hpp"
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <fstream>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("backfill", CF_TEST_PORT, true);

namespace {

void fill(const std::string& table, int n) {
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, 'original' FROM generate_series(1, " +
                   std::to_string(n) + ") g; ANALYZE " + table);
}

std::set<std::string> ids_in(const std::string& table) {
    std::set<std::string> out;
    for (const auto& row : cluster().exec("SELECT id::text FROM " + table)) out.insert(row[0].as<std::string>());
    return out;
}

changefeed::LatestVersionOptions backfill_options(const std::string& instance, int batch) {
    changefeed::LatestVersionOptions o = cftest::fast_options(instance);
    o.start_from_beginning = true;
    o.max_batch_size = batch;
    return o;
}

TEST(Backfill, DeliversEveryRowThenTheLogWithProgress) {
    cftest::create_table(cluster(), "bf_all", 4);
    fill("bf_all", 2000);
    cftest::Recorder rec;
    std::mutex mu;
    std::map<int, changefeed::BackfillProgress> last;
    auto o = backfill_options("one", 100);
    o.on_backfill_progress = [&](const changefeed::BackfillProgress& p) {
        std::lock_guard lock(mu);
        EXPECT_GE(p.rows_done, last[p.range_id].rows_done);  // monotonic
        last[p.range_id] = p;
    };
    auto p = changefeed::make_processor({cluster().conninfo(), "bf_all"}, "bf", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 2000; }));
    for (const auto& h : rec.all()) {
        EXPECT_TRUE(h.change.from_backfill);
        EXPECT_FALSE(h.change.written_at.has_value());  // read from the table: no write time
    }
    cluster().exec("UPDATE bf_all SET v = 'after' WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 2; }));
    EXPECT_FALSE(rec.of("1").back().from_backfill);
    EXPECT_EQ(rec.of("1").back().current.at("v").as_string(), "after");
    std::lock_guard lock(mu);
    ASSERT_EQ(last.size(), 4u);
    std::int64_t total = 0;
    for (const auto& [range, progress] : last) {
        EXPECT_TRUE(progress.done);
        EXPECT_GT(progress.estimated_total, 0);
        total += progress.rows_done;
    }
    EXPECT_EQ(total, 2000);
}

TEST(Backfill, StoppedMidwayItResumesFromItsLastKeyWithoutLoss) {
    cftest::create_table(cluster(), "bf_stop", 2);
    fill("bf_stop", 3000);
    cftest::Recorder first;
    std::atomic<int> batches{0};
    auto p = changefeed::make_processor(
        {cluster().conninfo(), "bf_stop"}, "bf",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            first.add(batch, ctx);
            ++batches;
        },
        backfill_options("one", 100));
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return batches >= 5; }));
    p.stop();
    ASSERT_LT(first.counts().size(), 3000u);
    auto state = cluster().exec("SELECT bool_and(backfill_done), sum(backfill_rows) FROM changefeed.leases"
                                " WHERE table_name = 'bf_stop'::regclass AND processor = 'bf'");
    EXPECT_FALSE(state[0][0].as<bool>());
    EXPECT_GT(state[0][1].as<long>(), 0);

    // Writes while it is down: all of them must arrive after the resume.
    cluster().exec("UPDATE bf_stop SET v = 'changed' WHERE id IN (1, 2999);"
                   "INSERT INTO bf_stop (id, v) VALUES (5001, 'new');"
                   "DELETE FROM bf_stop WHERE id = 1500");

    cftest::Recorder second;
    auto q = changefeed::make_processor({cluster().conninfo(), "bf_stop"}, "bf", second.handler(),
                                        backfill_options("one", 100));
    q.start();
    auto expected = ids_in("bf_stop");
    ASSERT_TRUE(cftest::eventually([&] {
        auto a = first.counts(), b = second.counts();
        for (const auto& id : expected)
            if (!a.count(id) && !b.count(id)) return false;
        return second.has("1") && second.has("2999");
    }));
    q.stop();
    EXPECT_EQ(second.of("1").back().current.at("v").as_string(), "changed");
    EXPECT_EQ(second.of("2999").back().current.at("v").as_string(), "changed");
    EXPECT_TRUE(second.has("5001"));
    // Resumed, not restarted: the second run did not read the whole table again.
    EXPECT_LT(second.size(), 3000u);
}

TEST(Backfill, KilledMidwayItResumesWithoutLoss) {
    cftest::create_table(cluster(), "bf_kill", 2);
    fill("bf_kill", 2000);
    const std::string out = cftest::test_file("handled.txt");
    auto doomed = cftest::processor_runner({cluster().conninfo(), "bf_kill", "bf", "doomed", out, "--from-beginning",
                                            "--batch", "50", "--slow-ms", "20"});
    ASSERT_TRUE(doomed.running());
    auto rows_done = [] {
        auto r = cluster().exec("SELECT coalesce(sum(backfill_rows), 0) FROM changefeed.leases"
                                " WHERE table_name = 'bf_kill'::regclass AND processor = 'bf'");
        return r[0][0].as<long>();
    };
    bool progressed = cftest::eventually([&] { return rows_done() >= 300; });
    doomed.kill_hard();
    ASSERT_TRUE(progressed);
    ASSERT_LT(rows_done(), 2000);

    cftest::Recorder rec;
    auto p = changefeed::make_processor({cluster().conninfo(), "bf_kill"}, "bf", rec.handler(),
                                        backfill_options("heir", 100));
    p.start();
    auto expected = ids_in("bf_kill");
    std::set<std::string> killed;
    ASSERT_TRUE(cftest::eventually([&] {
        std::ifstream in(out);
        for (std::string line; std::getline(in, line);) killed.insert(line);
        auto got = rec.counts();
        for (const auto& id : expected)
            if (!killed.count(id) && !got.count(id)) return false;
        return true;
    }));
    p.stop();
    EXPECT_LT(rec.size(), 2000u);  // resumed from the stored key, not from the start
    std::remove(out.c_str());
}

}  // namespace
