// Where a processor without checkpoints starts: start_time (the changes
// written since then), start_position (exactly after it); a checkpoint
// always wins over both, and bad values fail start() with their own code.
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <thread>

using namespace std::chrono_literals;
using changefeed::errc;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("startpos", CF_TEST_PORT, true);

namespace {

changefeed::Processor make(const std::string& table, const std::string& name, changefeed::Handler h,
                           changefeed::LatestVersionOptions o) {
    return changefeed::make_processor(changefeed::Collection(cluster().conninfo(), table), name, std::move(h),
                                      std::move(o));
}

void insert(const std::string& table, int from, int to) {
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(from) +
                   ", " + std::to_string(to) + ") g");
}

std::set<std::string> ids(int from, int to) {
    std::set<std::string> out;
    for (int i = from; i <= to; ++i) out.insert(std::to_string(i));
    return out;
}

std::set<std::string> handled(const cftest::Recorder& rec) {
    std::set<std::string> out;
    for (const auto& [doc, n] : rec.counts()) out.insert(doc);
    return out;
}

// The server's clock: written_at is taken there.
std::chrono::system_clock::time_point server_now() {
    auto us = cluster().exec("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")[0][0].as<long long>();
    return std::chrono::system_clock::time_point(std::chrono::microseconds(us));
}

TEST(StartPositions, StartTimeDeliversWhatWasWrittenSinceThen) {
    cftest::create_table(cluster(), "sp_time", 4);
    insert("sp_time", 1, 10);
    const auto t = server_now();  // after those commits
    // The next writes start after t by the server's clock.
    ASSERT_TRUE(cftest::eventually([&] { return server_now() > t; }));
    insert("sp_time", 11, 20);
    cluster().exec("UPDATE sp_time SET v = 'changed' WHERE id = 3");

    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_time = t;
    auto p = make("sp_time", "since", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    auto want = ids(11, 20);
    want.insert("3");
    ASSERT_TRUE(cftest::eventually([&] { return handled(rec) == want; }));
    insert("sp_time", 21, 25);
    for (int i = 21; i <= 25; ++i) want.insert(std::to_string(i));
    ASSERT_TRUE(cftest::eventually([&] { return handled(rec) == want; }));
    // Nothing written before the start time, nor twice: it would have come
    // before the marker of its range.
    const auto markers = cftest::deliver_markers(cluster(), "sp_time", 1000, rec);
    ASSERT_FALSE(markers.empty());
    want.insert(markers.begin(), markers.end());
    EXPECT_EQ(handled(rec), want);
    for (const auto& [doc, n] : rec.counts()) EXPECT_EQ(n, 1) << "doc " << doc;
}

TEST(StartPositions, AStartTimeBeforeRetentionIsHistoryLost) {
    cftest::create_table(cluster(), "sp_lost", 2);
    insert("sp_lost", 1, 5);
    // Retention dropped what was written before now (the horizon a dropped partition leaves).
    cluster().exec("INSERT INTO changefeed.horizon (collection_id, dropped_txid, dropped_before)"
                   " SELECT id, pg_current_xact_id(), now() FROM changefeed.collections"
                   " WHERE table_name = 'sp_lost'::regclass");
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_time = std::chrono::system_clock::now() - 1h;
    auto p = make("sp_lost", "early", cftest::noop_handler(), o);
    try {
        p.start();
        FAIL() << "start() succeeded";
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), errc::history_lost);
        EXPECT_EQ(e.sqlstate(), "CF006");
        EXPECT_NE(std::string(e.what()).find("sp_lost"), std::string::npos) << e.what();
    }
    EXPECT_EQ(p.state(), changefeed::State::stopped);
    // Nothing was filed: a later start time works.
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM changefeed.leases WHERE processor = 'early'")[0][0].as<int>(), 0);
    o.start_time = server_now() + 1s;
    auto later = make("sp_lost", "early", cftest::noop_handler(), o);
    later.start();
    EXPECT_TRUE(cftest::wait_running(later, 2));
}

TEST(StartPositions, ACheckpointWinsOverTheStartTime) {
    cftest::create_table(cluster(), "sp_ckpt", 4);
    cftest::Recorder first;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    auto p = make("sp_ckpt", "ckpt", first.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    insert("sp_ckpt", 1, 10);
    ASSERT_TRUE(cftest::eventually([&] { return first.counts().size() == 10; }));
    p.stop();
    insert("sp_ckpt", 11, 15);  // while stopped

    // Restarted with a start time before everything: the checkpoints win.
    cftest::Recorder second;
    o.start_time = std::chrono::system_clock::now() - 1h;
    auto q = make("sp_ckpt", "ckpt", second.handler(), o);
    q.start();
    ASSERT_TRUE(cftest::wait_running(q, 4));
    ASSERT_TRUE(cftest::eventually([&] { return handled(second) == ids(11, 15); }));
    // Nothing from before the checkpoints: it would have come before the marker of its range.
    const auto markers = cftest::deliver_markers(cluster(), "sp_ckpt", 1000, second);
    ASSERT_FALSE(markers.empty());
    auto want = ids(11, 15);
    want.insert(markers.begin(), markers.end());
    EXPECT_EQ(handled(second), want);
}

TEST(StartPositions, StartPositionResumesExactlyAfterIt) {
    cftest::create_table(cluster(), "sp_pos", 4);
    const std::string origin = cluster().exec("SELECT changefeed.current_position()")[0][0].as<std::string>();
    insert("sp_pos", 1, 10);
    // The position after the third change: inside a window, as a handler's Context::position can be.
    auto r = cluster().exec("SELECT doc_id, \"position\" FROM changefeed.read('sp_pos', '" + origin +
                            "', max_changes => 3) ORDER BY seq");
    ASSERT_EQ(r.size(), 3u);
    ASSERT_EQ(r[2][0].as<std::string>(), "3");
    const std::string after_third = r[2][1].as<std::string>();

    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_position = after_third;
    auto p = make("sp_pos", "resume", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    ASSERT_TRUE(cftest::eventually([&] { return handled(rec) == ids(4, 10); }));
    insert("sp_pos", 11, 12);
    ASSERT_TRUE(cftest::eventually([&] { return handled(rec) == ids(4, 12); }));
    for (const auto& [doc, n] : rec.counts()) EXPECT_EQ(n, 1) << "doc " << doc;
}

TEST(StartPositions, ABadStartPositionFailsStart) {
    cftest::create_table(cluster(), "sp_bad", 2);
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_position = "not a position";
    auto p = make("sp_bad", "bad", cftest::noop_handler(), o);
    EXPECT_EQ(cftest::code_of([&] { p.start(); }), errc::malformed_position);
    EXPECT_EQ(p.state(), changefeed::State::stopped);
    // A damaged one too (a character of a real position changed).
    std::string pos = cluster().exec("SELECT changefeed.current_position()")[0][0].as<std::string>();
    pos[pos.size() - 3] = pos[pos.size() - 3] == 'A' ? 'B' : 'A';
    o.start_position = pos;
    auto q = make("sp_bad", "bad", cftest::noop_handler(), o);
    EXPECT_EQ(cftest::code_of([&] { q.start(); }), errc::malformed_position);
}

TEST(StartPositions, AtMostOneStartOption) {
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_time = std::chrono::system_clock::now();
    o.start_position = "x";
    EXPECT_EQ(cftest::code_of([&] { make("sp_none", "n", cftest::noop_handler(), o); }), errc::invalid_option);
    o.start_position.clear();
    o.start_from_beginning = true;
    EXPECT_EQ(cftest::code_of([&] { make("sp_none", "n", cftest::noop_handler(), o); }), errc::invalid_option);
    o.start_time.reset();
    o.start_position = "x";
    EXPECT_EQ(cftest::code_of([&] { make("sp_none", "n", cftest::noop_handler(), o); }), errc::invalid_option);
    // The all-versions feed takes the common ones.
    changefeed::AllVersionsOptions a(static_cast<changefeed::ProcessorOptions>(cftest::fast_options("one")));
    a.start_time = std::chrono::system_clock::now();
    a.start_position = "x";
    EXPECT_EQ(cftest::code_of([&] {
                  changefeed::make_processor({cluster().conninfo(), "sp_none"}, "n", cftest::noop_handler(),
                                             changefeed::AllVersionsOptions(a));
              }),
              errc::invalid_option);
}

}  // namespace
