// A collection that logs keys alone (images => 'keys'): a latest-version
// processor sees each document as it is in the table when it is read, and
// not the rows deleted by then; an all-versions processor is refused with
// its own code (CF021, errc::images_not_logged).
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <boost/json.hpp>

using changefeed::errc;
using cftest::cluster;
using cftest::code_of;

CF_CLUSTER_ENVIRONMENT("imageskeys", CF_TEST_PORT, true);

namespace {

std::string keys_table(const std::string& prefix) {
    const std::string table = cftest::test_table(prefix);
    cluster().exec("CREATE TABLE " + table +
                   " (id int PRIMARY KEY, v text, deleted bool NOT NULL DEFAULT false, doc jsonb);"
                   "SELECT changefeed.enable('" +
                   table + "', ranges => 4, images => 'keys', keep_previous => false)");
    return table;
}

TEST(ImagesKeys, LatestVersionProcessorSeesTheDocumentsAsTheyAreNow) {
    const std::string table = keys_table("ik_lv");
    cftest::Recorder rec;
    auto p = changefeed::make_processor({cluster().conninfo(), table}, "proj", rec.handler(),
                                        changefeed::LatestVersionOptions(cftest::fast_options("one")));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    cluster().exec("INSERT INTO " + table + " (id, v, doc) VALUES (1, 'first', '{\"n\": 1}')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    EXPECT_EQ(rec.of("1").back().current.at("v").as_string(), "first");
    EXPECT_EQ(rec.of("1").back().current.at("doc").at("n").as_int64(), 1);

    // Written while no one reads: read later, each document as the table holds it then.
    p.stop();
    cluster().exec("UPDATE " + table + " SET v = 'second' WHERE id = 1");
    cluster().exec("UPDATE " + table + " SET v = 'third', doc = '{\"n\": 3}' WHERE id = 1");
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (2, 'gone')");
    cluster().exec("DELETE FROM " + table + " WHERE id = 2");
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (3, 'marker')");
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("3") && rec.of("1").size() >= 2; }));
    const auto one = rec.of("1").back();
    EXPECT_EQ(one.operation, changefeed::Operation::replace);
    EXPECT_EQ(one.current.at("v").as_string(), "third");
    EXPECT_EQ(one.current.at("doc").at("n").as_int64(), 3);
    EXPECT_TRUE(one.previous.is_null());
    EXPECT_FALSE(rec.has("2"));  // deleted before it was read: not delivered, nor its delete
    EXPECT_EQ(rec.of("3").back().current.at("v").as_string(), "marker");
}

TEST(ImagesKeys, AllVersionsProcessorIsRefusedWithItsOwnCode) {
    const std::string table = keys_table("ik_av");
    cftest::Recorder rec;
    auto p = changefeed::make_processor({cluster().conninfo(), table}, "audit", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("one")));
    EXPECT_EQ(code_of([&] { p.start(); }), errc::images_not_logged);
    EXPECT_EQ(p.state(), changefeed::State::stopped);
    // Once it logs images again (changes from then on), the processor starts.
    cluster().exec("SELECT changefeed.alter('" + table + "', images => 'full', keep_previous => true)");
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (1, 'a')");
    cluster().exec("DELETE FROM " + table + " WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 2; }));
    EXPECT_EQ(rec.of("1")[1].operation, changefeed::Operation::delete_);
    EXPECT_EQ(rec.of("1")[1].previous.at("v").as_string(), "a");
}

// Switched to keys alone under a running all-versions processor: the reads
// it makes are refused (CF021), and each range halts in history_lost with
// the runbook, reported once, instead of failing on every poll; it never
// reads on from now by itself.
TEST(ImagesKeys, AllVersionsProcessorHaltsWhenItsCollectionSwitchesToKeys) {
    const std::string table = cftest::test_table("ik_switch");
    cluster().exec("CREATE TABLE " + table +
                   " (id int PRIMARY KEY, v text);"
                   "SELECT changefeed.enable('" +
                   table + "', ranges => 2)");
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("one");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor({cluster().conninfo(), table}, "audit", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (1, 'full')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));

    cluster().exec("SELECT changefeed.alter('" + table + "', images => 'keys', keep_previous => false)");
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (2, 'keys')");
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::history_lost; }));
    ASSERT_TRUE(cftest::eventually([&] { return errors.messages(errc::history_lost).size() >= 2; }));
    for (const auto& m : errors.messages(errc::history_lost)) {
        EXPECT_NE(m.find("docs/runbooks/history-lost.md"), std::string::npos) << m;
        EXPECT_NE(m.find("images => 'keys'"), std::string::npos) << m;
        EXPECT_NE(m.find("will not restart from now"), std::string::npos) << m;
    }
    // A latest-version witness sees a later write: a wake-up and reads the
    // halted processor had too.
    cftest::Recorder seen;
    auto witness = changefeed::make_processor({cluster().conninfo(), table}, "witness", seen.handler(),
                                              changefeed::LatestVersionOptions(cftest::fast_options("w")));
    witness.start();
    ASSERT_TRUE(cftest::wait_running(witness, 2));
    cluster().exec("INSERT INTO " + table + " (id, v) VALUES (3, 'keys')");
    ASSERT_TRUE(cftest::eventually([&] { return seen.has("3"); }));
    witness.stop();
    EXPECT_EQ(errors.messages(errc::history_lost).size(), 2u);  // once per range, not per poll
    EXPECT_FALSE(errors.has(errc::images_not_logged));
    EXPECT_FALSE(rec.has("2"));
    EXPECT_FALSE(rec.has("3"));
    EXPECT_EQ(p.state(), changefeed::State::history_lost);
    p.stop();
}

}  // namespace
