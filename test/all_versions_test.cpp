// The all-versions-and-deletes feed: every write, in order per document,
// deletes carrying the previous version.
#include "support/cluster.hpp"
#include "support/recorder.hpp"

using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("allversions", CF_TEST_PORT, true);

namespace {

TEST(AllVersions, EveryWriteArrivesInOrderWithDeletes) {
    cftest::create_table(cluster(), "av_audit", 4);
    cftest::Recorder rec;
    auto p = changefeed::make_all_versions_processor({cluster().conninfo(), "av_audit"}, "audit", rec.handler(),
                                                     cftest::fast_options("one"));
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::running; }));
    cluster().exec("INSERT INTO av_audit (id, v) VALUES (1, 'a')");
    cluster().exec("UPDATE av_audit SET v = 'b' WHERE id = 1");
    cluster().exec("DELETE FROM av_audit WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 3; }));
    auto changes = rec.of("1");
    EXPECT_EQ(changes[0].operation, changefeed::Operation::create);
    EXPECT_TRUE(changes[0].previous.is_null());
    EXPECT_EQ(changes[1].operation, changefeed::Operation::replace);
    EXPECT_EQ(changes[1].current.at("v").as_string(), "b");
    EXPECT_EQ(changes[1].previous.at("v").as_string(), "a");
    EXPECT_EQ(changes[2].operation, changefeed::Operation::remove);
    EXPECT_TRUE(changes[2].current.is_null());
    EXPECT_EQ(changes[2].previous.at("v").as_string(), "b");
    EXPECT_LT(changes[0].seq, changes[1].seq);
    EXPECT_LT(changes[1].seq, changes[2].seq);
}

}  // namespace
