// The latest-version feed's contract, one test per case.  What it carries: a
// document's latest version, whole, once per read however often it changed;
// a soft delete (a row update) but not a hard delete.  Where a processor
// starts: at the end of the feed without a checkpoint, at the existing rows
// with start_from_beginning, at its checkpoint when it has one.  Plus the
// handler contract (non-empty batches, context, independent names).
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <boost/json.hpp>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("latest", CF_TEST_PORT, true);

namespace {

class LatestVersion : public ::testing::Test {
protected:
    void SetUp() override {
        table_ = cftest::test_table("lv");
        cftest::create_table(cluster(), table_, 4);
    }

    changefeed::Processor processor(cftest::Recorder& rec, const std::string& name = "proj",
                                    changefeed::LatestVersionOptions o = cftest::fast_options("one")) {
        return changefeed::make_processor(changefeed::Collection(cluster().conninfo(), table_), name, rec.handler(),
                                          std::move(o));
    }

    // Starts, waits until running with all ranges leased.
    void start(changefeed::Processor& p) {
        p.start();
        ASSERT_TRUE(cftest::wait_running(p, 4));
    }

    void sql(const std::string& s) { cluster().exec(s); }

    std::string table_;
};

TEST_F(LatestVersion, CreateAndReplaceBetweenReadsArriveOnceCarryingTheReplace) {
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    p.stop();  // a checkpoint exists; both writes land between two reads
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'created')");
    sql("UPDATE " + table_ + " SET v = 'replaced' WHERE id = 1");
    sql("INSERT INTO " + table_ + " (id, v) VALUES (2, 'marker')");
    start(p);
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1") && rec.has("2"); }));
    auto changes = rec.of("1");
    ASSERT_EQ(changes.size(), 1u);
    EXPECT_EQ(changes[0].current.at("v").as_string(), "replaced");
}

TEST_F(LatestVersion, APatchArrivesAsTheWholeDocument) {
    sql("INSERT INTO " + table_ + " (id, v, doc) VALUES (1, 'keep', '{\"a\": 1, \"b\": {\"c\": 2}}')");
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    sql("UPDATE " + table_ + " SET doc = jsonb_set(doc, '{b,c}', '3') WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    auto c = rec.of("1").at(0);
    EXPECT_EQ(c.current.at("v").as_string(), "keep");
    EXPECT_EQ(c.current.at("id").as_int64(), 1);
    EXPECT_EQ(c.current.at("doc").at("a").as_int64(), 1);
    EXPECT_EQ(c.current.at("doc").at("b").at("c").as_int64(), 3);
    EXPECT_EQ(c.operation, changefeed::Operation::replace);
}

TEST_F(LatestVersion, AHardDeleteIsNotOnTheFeed) {
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'doomed')");
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    sql("DELETE FROM " + table_ + " WHERE id = 1");
    // A marker in every range: a change of 1 would have come before its range's.
    ASSERT_FALSE(cftest::deliver_markers(cluster(), table_, 2, rec).empty());
    p.stop();
    EXPECT_FALSE(rec.has("1"));
    for (const auto& h : rec.all()) EXPECT_NE(h.change.operation, changefeed::Operation::delete_);
}

TEST_F(LatestVersion, ASoftDeleteIsOnTheFeed) {
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'soon gone')");
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    sql("UPDATE " + table_ + " SET deleted = true WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    EXPECT_TRUE(rec.of("1").at(0).current.at("deleted").as_bool());
}

TEST_F(LatestVersion, ACreateThenHardDeleteBetweenReadsIsNotOnTheFeed) {
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    p.stop();
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'ephemeral')");
    sql("DELETE FROM " + table_ + " WHERE id = 1");
    start(p);
    // A marker in every range: a change of 1 would have come before its range's.
    ASSERT_FALSE(cftest::deliver_markers(cluster(), table_, 2, rec).empty());
    p.stop();
    EXPECT_FALSE(rec.has("1"));
}

TEST_F(LatestVersion, WithoutCheckpointItStartsAtTheEndOfTheFeed) {
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'before start')");
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    // A marker in every range: a change of 1 would have come before its range's.
    ASSERT_FALSE(cftest::deliver_markers(cluster(), table_, 2, rec).empty());
    p.stop();
    EXPECT_FALSE(rec.has("1"));
}

TEST_F(LatestVersion, StartFromBeginningDeliversTheExistingRows) {
    sql("INSERT INTO " + table_ + " (id, v) SELECT g, 'existing' FROM generate_series(1, 50) g");
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_from_beginning = true;
    auto p = processor(rec, "proj", o);
    start(p);
    sql("INSERT INTO " + table_ + " (id, v) VALUES (51, 'new')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 51; }));
}

TEST_F(LatestVersion, ACheckpointWinsOverStartFromBeginning) {
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'before first start')");
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    p.stop();
    sql("INSERT INTO " + table_ + " (id, v) VALUES (2, 'while stopped')");
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_from_beginning = true;
    auto again = processor(rec, "proj", o);
    start(again);
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2"); }));
    // A marker in every range: a replay of 1 would have come before its range's.
    ASSERT_FALSE(cftest::deliver_markers(cluster(), table_, 3, rec).empty());
    again.stop();
    EXPECT_FALSE(rec.has("1"));  // not replayed: the checkpoint won
    EXPECT_EQ(rec.of("2").size(), 1u);
}

TEST_F(LatestVersion, AnInstanceStartingLaterDoesNotSkipWhatCameInBetween) {
    cftest::Recorder first;
    auto p = processor(first);
    start(p);
    p.stop();  // the lease set exists, holding the first start's position
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'in between')");
    cftest::Recorder later;
    auto q = processor(later, "proj", cftest::fast_options("two"));
    start(q);
    ASSERT_TRUE(cftest::eventually([&] { return later.has("1"); }));
}

TEST_F(LatestVersion, HandlerGetsNonEmptyBatchesAndItsContext) {
    cftest::Recorder rec;
    auto p = processor(rec, "ctx-proj");
    start(p);
    sql("INSERT INTO " + table_ + " (id, v) SELECT g, 'x' FROM generate_series(1, 40) g");
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 40; }));
    EXPECT_FALSE(rec.empty_batch_seen());
    auto r = cluster().exec("SELECT id::text, changefeed.range_of(id::text, 4) FROM " + table_);
    std::map<std::string, int> range_of;
    for (const auto& row : r) range_of[row[0].as<std::string>()] = row[1].as<int>();
    for (const auto& h : rec.all()) {
        EXPECT_EQ(h.context.range_id, range_of[h.change.doc_id]);
        EXPECT_EQ(h.change.range_id, h.context.range_id);
        EXPECT_EQ(h.context.processor, "ctx-proj");
        EXPECT_EQ(h.context.instance, "one");
        EXPECT_GT(h.context.lease_epoch, 0);
    }
}

TEST_F(LatestVersion, DifferentNamesReadIndependently) {
    cftest::Recorder a, b;
    auto pa = processor(a, "projection-a");
    auto pb = processor(b, "projection-b");
    start(pa);
    start(pb);
    sql("INSERT INTO " + table_ + " (id, v) SELECT g, 'x' FROM generate_series(1, 20) g");
    ASSERT_TRUE(cftest::eventually([&] { return a.counts().size() == 20 && b.counts().size() == 20; }));
}

TEST_F(LatestVersion, NothingIsReadBeforeStart) {
    cftest::Recorder rec;
    auto p = processor(rec);
    sql("INSERT INTO " + table_ + " (id, v) VALUES (1, 'x')");
    // Wake-ups and reads go by (a witness's rounds of markers) without a call.
    ASSERT_TRUE(cftest::witness_rounds(cluster(), table_, 1000));
    EXPECT_EQ(rec.size(), 0u);
    EXPECT_EQ(p.state(), changefeed::State::stopped);
    auto r = cluster().exec("SELECT count(*) FROM changefeed.leases WHERE table_name = '" + table_ +
                            "'::regclass AND processor = 'proj'");
    EXPECT_EQ(r[0][0].as<int>(), 0);
}

TEST_F(LatestVersion, AThrowingHandlerGetsTheBatchAgainAndOnErrorIsTold) {
    std::mutex mu;
    int calls = 0;
    cftest::ErrorLog log;
    cftest::Recorder rec;
    auto o = cftest::fast_options("one");
    o.on_error = log.sink();
    auto p = changefeed::make_processor(
        changefeed::Collection(cluster().conninfo(), table_), "thrower",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            {
                std::lock_guard lock(mu);
                if (++calls <= 2) throw std::runtime_error("projection unavailable");
            }
            rec.add(batch, ctx);
        },
        o);
    start(p);
    sql("INSERT INTO " + table_ + " (id, v) VALUES (7, 'x')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("7"); }));
    p.stop();
    auto errors = log.all();
    ASSERT_GE(errors.size(), 2u);
    EXPECT_EQ(errors[0].code, changefeed::errc::handler_failed);
    auto range = cluster().exec("SELECT changefeed.range_of('7', 4)")[0][0].as<int>();
    ASSERT_TRUE(errors[0].range_id.has_value());
    EXPECT_EQ(*errors[0].range_id, range);
    EXPECT_NE(errors[0].message.find("projection unavailable"), std::string::npos);
    EXPECT_EQ(rec.of("7").size(), 1u);
}

struct User {
    int id;
    std::string v;
};

User tag_invoke(boost::json::value_to_tag<User>, const boost::json::value& jv) {
    return {static_cast<int>(jv.at("id").as_int64()), std::string(jv.at("v").as_string())};
}

TEST_F(LatestVersion, DocumentsConvertToTypes) {
    cftest::Recorder rec;
    auto p = processor(rec);
    start(p);
    sql("INSERT INTO " + table_ + " (id, v) VALUES (3, 'typed')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("3"); }));
    auto user = rec.of("3").at(0).as<User>();
    EXPECT_EQ(user.id, 3);
    EXPECT_EQ(user.v, "typed");
}

}  // namespace
