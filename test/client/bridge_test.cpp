// The outbox bridge against a real feed: the envelopes the ready mappers make
// (CloudEvents 1.0, Debezium), the runner's contract (publish, then
// checkpoint; a failing mapper or publisher checkpoints nothing), and
// redelivery with the same envelope ids.  The publisher is a recording one:
// it implements the port; the feed and the server are real.
#include "support/caught_up.hpp"
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <thread>

using cftest::cluster;
using changefeed::Operation;
namespace json = boost::json;
using namespace std::chrono_literals;

CF_CLUSTER_ENVIRONMENT("bridge", CF_TEST_PORT, true);

namespace {

// A publisher that records what it was given.  While `down`, it fails every
// call; with `store_before_failing` it stores the first envelope of the call
// before failing (a broker that took part of the batch, or whose
// acknowledgement was lost).
class RecordingPublisher : public changefeed::Publisher {
public:
    void publish(const std::vector<changefeed::Envelope>& envelopes) override {
        std::lock_guard lock(mu_);
        ++calls_;
        if (down) {
            if (store_before_failing) {
                const std::size_t n = store_all_before_failing ? envelopes.size() : 1;
                for (std::size_t i = 0; i < n && i < envelopes.size(); ++i) got_.push_back(envelopes[i]);
            }
            throw changefeed::Error(changefeed::errc::publish_failed, "broker unavailable");
        }
        got_.insert(got_.end(), envelopes.begin(), envelopes.end());
    }
    std::vector<changefeed::Envelope> all() const {
        std::lock_guard lock(mu_);
        return got_;
    }
    std::vector<std::string> ids() const {
        std::vector<std::string> out;
        for (const auto& e : all()) out.push_back(e.id);
        return out;
    }
    std::set<std::string> unique_ids() const {
        auto v = ids();
        return {v.begin(), v.end()};
    }
    int calls() const {
        std::lock_guard lock(mu_);
        return calls_;
    }
    std::atomic<bool> down{false};
    std::atomic<bool> store_before_failing{false};
    std::atomic<bool> store_all_before_failing{false};

private:
    mutable std::mutex mu_;
    std::vector<changefeed::Envelope> got_;
    int calls_ = 0;
};

// A pipelining publisher that records what it was sent.  confirm() waits
// while `hold`, and fails while `down` (the acknowledgements lost).
class PipelinedRecorder : public changefeed::PipelinedPublisher {
public:
    void send(const std::vector<changefeed::Envelope>& envelopes) override {
        std::lock_guard lock(mu_);
        for (const auto& e : envelopes) sent_.push_back(e.id);
    }
    void confirm() override {
        std::unique_lock lock(mu_);
        ++confirms_;
        cv_.wait(lock, [&] { return !hold; });
        if (down) {
            ++failed_confirms_;
            throw changefeed::Error(changefeed::errc::publish_failed, "acknowledgements lost");
        }
    }
    void release() {
        {
            std::lock_guard lock(mu_);
            hold = false;
        }
        cv_.notify_all();
    }
    std::vector<std::string> sent() const {
        std::lock_guard lock(mu_);
        return sent_;
    }
    std::set<std::string> unique_sent() const {
        auto v = sent();
        return {v.begin(), v.end()};
    }
    int confirms() const {
        std::lock_guard lock(mu_);
        return confirms_;
    }
    int failed_confirms() const {
        std::lock_guard lock(mu_);
        return failed_confirms_;
    }
    bool hold = false;  // set before the bridge starts; release() ends it
    std::atomic<bool> down{false};

private:
    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::string> sent_;
    int confirms_ = 0, failed_confirms_ = 0;
};

changefeed::BridgeOptions bridge_options(const std::string& instance) {
    changefeed::BridgeOptions o{changefeed::AllVersionsOptions(cftest::fast_options(instance))};
    o.publish_retry_min = 50ms;
    o.publish_retry_max = 200ms;
    return o;
}

// The options of a bridge whose empty reads `idle` counts.
changefeed::BridgeOptions counted_options(const std::string& instance, const std::shared_ptr<cftest::CaughtUp>& idle) {
    auto o = bridge_options(instance);
    o.metrics = idle;
    return o;
}

// Nothing more may come: each of the bridge's `ranges` read again and found
// nothing waiting, so a retry or a redelivery would have been published first.
bool read_to_the_end_again(const cftest::CaughtUp& idle, int ranges) {
    const auto before = idle.by_range();
    return cftest::eventually([&] { return idle.all_again(before, ranges); });
}

bool wait_bridge_running(const changefeed::Bridge& b) {
    return cftest::eventually([&] { return b.state() == changefeed::State::running; });
}

// The feed's own view of the table: an all-versions processor that records
// every change, the truth the envelopes are compared with.
struct Reference {
    Reference(const std::string& table)
        : processor(changefeed::make_processor({cluster().conninfo(), table}, "reference", rec.handler(),
                                               changefeed::AllVersionsOptions(cftest::fast_options("ref")))) {
        processor.start();
        EXPECT_TRUE(cftest::wait_running(processor));
    }
    cftest::Recorder rec;
    changefeed::Processor processor;
};

std::string current_database() { return cluster().exec("SELECT current_database()")[0][0].as<std::string>(); }

std::int64_t pending(const std::string& table, const std::string& processor) {
    return cluster()
        .exec("SELECT coalesce(sum(pending), 0) FROM changefeed.lag('" + table + "', '" + processor + "')")[0][0]
        .as<std::int64_t>();
}

json::object body_of(const changefeed::Envelope& e) { return json::parse(e.body).as_object(); }

std::map<std::string, changefeed::Envelope> by_id(const std::vector<changefeed::Envelope>& all) {
    std::map<std::string, changefeed::Envelope> m;
    for (const auto& e : all) m.emplace(e.id, e);
    return m;
}

std::int64_t micros(std::chrono::system_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// "2026-11-30T08:34:44.123456Z" as epoch microseconds (days from civil, H. Hinnant).
std::int64_t parse_rfc3339_micros(const std::string& s) {
    int y, mo, d, h, mi, sec;
    long long us;
    if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d.%6lldZ", &y, &mo, &d, &h, &mi, &sec, &us) != 7) return -1;
    const auto days = std::chrono::sys_days(std::chrono::year(y) / mo / d).time_since_epoch().count();
    return ((static_cast<std::int64_t>(days) * 24 + h) * 60 + mi) * 60'000'000LL + sec * 1'000'000LL + us;
}

// Ids in order of first appearance, per document (the doc id of the feed's change).
std::vector<std::string> first_seen(const std::vector<std::string>& ids, const std::set<std::string>& of_doc) {
    std::vector<std::string> out;
    std::set<std::string> seen;
    for (const auto& id : ids)
        if (of_doc.count(id) && seen.insert(id).second) out.push_back(id);
    return out;
}

void expect_per_document_order(const Reference& ref, const std::vector<std::string>& published,
                               const std::vector<std::string>& docs) {
    for (const auto& doc : docs) {
        std::vector<std::string> expected;
        for (const auto& c : ref.rec.of(doc)) expected.push_back(c.event_id);
        EXPECT_EQ(first_seen(published, {expected.begin(), expected.end()}), expected) << "document " << doc;
    }
}

// Writes of every kind over documents 1..5, two in one transaction.
void write_history(const std::string& t) {
    cluster().exec("INSERT INTO " + t + " (id, v, doc) VALUES (1, 'a', '{\"n\": 1}'), (2, 'b', NULL), (3, 'c', NULL)");
    cluster().exec("UPDATE " + t + " SET v = 'a2' WHERE id = 1; UPDATE " + t + " SET v = 'a3' WHERE id = 1");
    cluster().exec("DELETE FROM " + t + " WHERE id = 2");
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (4, 'd'), (5, 'e')");
    cluster().exec("UPDATE " + t + " SET v = 'e2' WHERE id = 5");
}

std::vector<cftest::Handled> clears_of(const Reference& ref) {
    std::vector<cftest::Handled> out;
    for (const auto& h : ref.rec.all())
        if (h.change.operation == Operation::clear) out.push_back(h);
    return out;
}

TEST(Bridge, CloudEventsEveryCommittedChangeArrivesOnce) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 4);
    Reference ref(t);
    RecordingPublisher pub;
    auto idle = std::make_shared<cftest::CaughtUp>();
    changefeed::Bridge bridge({cluster().conninfo(), t}, "to-bus", changefeed::cloudevents_mapper(), pub,
                              counted_options("one", idle));
    bridge.start();
    ASSERT_TRUE(wait_bridge_running(bridge));
    write_history(t);
    cluster().exec("TRUNCATE " + t);
    // 3 + 2 + 1 + 2 + 1 writes, and a TRUNCATE logged as a clear in each of 4 ranges.
    ASSERT_TRUE(cftest::eventually([&] { return ref.rec.size() == 13 && pub.ids().size() >= 13; }));
    ASSERT_TRUE(read_to_the_end_again(*idle, 4));  // nothing more may come

    const auto got = pub.all();
    ASSERT_EQ(got.size(), 13u);
    const auto envelopes = by_id(got);
    ASSERT_EQ(envelopes.size(), 13u) << "an event id published twice";
    const std::string db = current_database();
    const std::regex rfc3339(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z)");
    for (const auto& h : ref.rec.all()) {
        const auto& c = h.change;
        ASSERT_TRUE(envelopes.count(c.event_id)) << c.event_id;
        const auto& e = envelopes.at(c.event_id);
        EXPECT_EQ(e.table, "public." + t);
        EXPECT_EQ(e.subject, "");
        EXPECT_EQ(e.content_type, "application/cloudevents+json");
        const auto ev = body_of(e);
        EXPECT_EQ(ev.at("specversion").as_string(), "1.0");
        EXPECT_EQ(ev.at("id").as_string(), c.event_id);
        EXPECT_EQ(ev.at("source").as_string(), "/" + db + "/public." + t);
        EXPECT_EQ(ev.at("type").as_string(), std::string("changefeed.") + changefeed::to_string(c.operation));
        EXPECT_EQ(ev.at("datacontenttype").as_string(), "application/json");
        ASSERT_TRUE(ev.at("changefeedrange").is_int64());
        EXPECT_EQ(ev.at("changefeedrange").as_int64(), c.range_id);
        ASSERT_TRUE(c.written_at.has_value());
        const std::string time(ev.at("time").as_string());
        EXPECT_TRUE(std::regex_match(time, rfc3339)) << time;
        EXPECT_EQ(parse_rfc3339_micros(time), micros(*c.written_at));
        if (c.operation == Operation::clear) {
            EXPECT_FALSE(ev.contains("subject"));
        } else {
            EXPECT_EQ(ev.at("subject").as_string(), c.doc_id);
        }
        const auto& data = ev.at("data").as_object();
        EXPECT_EQ(data.at("current"), c.current);
        EXPECT_EQ(data.at("previous"), c.previous);
    }
    // A few spot checks against what was written, not only against the feed.
    for (const auto& c : ref.rec.of("1")) {
        const auto ev = body_of(envelopes.at(c.event_id));
        if (c.operation == Operation::create) EXPECT_EQ(ev.at("data").at("current").at("doc").at("n").as_int64(), 1);
    }
    const auto del = ref.rec.of("2").back();
    ASSERT_EQ(del.operation, Operation::delete_);
    const auto del_ev = body_of(envelopes.at(del.event_id));
    EXPECT_EQ(del_ev.at("type").as_string(), "changefeed.delete");
    EXPECT_TRUE(del_ev.at("data").at("current").is_null());
    EXPECT_EQ(del_ev.at("data").at("previous").at("v").as_string(), "b");
    EXPECT_EQ(clears_of(ref).size(), 4u);  // CloudEvents: one event per change, a clear per range

    expect_per_document_order(ref, pub.ids(), {"1", "2", "3", "4", "5"});
    const auto s = bridge.stats();
    EXPECT_EQ(s.changes, 13);
    EXPECT_EQ(s.published, 13);
    EXPECT_EQ(s.filtered, 0);
    EXPECT_EQ(s.publish_failures, 0);
    EXPECT_EQ(s.mapper_failures, 0);
}

TEST(Bridge, DebeziumOpsSourceAndOneTruncatePerStatement) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 4);
    Reference ref(t);
    RecordingPublisher pub;
    auto idle = std::make_shared<cftest::CaughtUp>();
    changefeed::Bridge bridge({cluster().conninfo(), t}, "to-debezium", changefeed::debezium_mapper(), pub,
                              counted_options("one", idle));
    bridge.start();
    ASSERT_TRUE(wait_bridge_running(bridge));
    const auto before_writes = std::chrono::system_clock::now();
    write_history(t);
    cluster().exec("TRUNCATE " + t);
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (6, 'f')");
    cluster().exec("TRUNCATE " + t);
    // 9 writes + 1 insert, and 2 TRUNCATEs logged in 4 ranges each.
    ASSERT_TRUE(cftest::eventually([&] { return ref.rec.size() == 18 && bridge.stats().changes >= 18; }));
    ASSERT_TRUE(read_to_the_end_again(*idle, 4));  // nothing more may come

    const auto got = pub.all();
    ASSERT_EQ(got.size(), 12u);  // 10 row changes, one "t" per TRUNCATE
    const auto envelopes = by_id(got);
    ASSERT_EQ(envelopes.size(), 12u);
    const std::string db = current_database();
    int truncates = 0;
    for (const auto& h : ref.rec.all()) {
        const auto& c = h.change;
        if (c.operation == Operation::clear && c.range_id != 0) {
            EXPECT_FALSE(envelopes.count(c.event_id)) << "a clear of range " << c.range_id << " published";
            continue;
        }
        ASSERT_TRUE(envelopes.count(c.event_id)) << c.event_id;
        const auto& e = envelopes.at(c.event_id);
        EXPECT_EQ(e.table, "public." + t);
        EXPECT_EQ(e.content_type, "application/json");
        const auto ev = body_of(e);
        const std::string op(ev.at("op").as_string());
        switch (c.operation) {
            case Operation::create: EXPECT_EQ(op, "c"); break;
            case Operation::replace: EXPECT_EQ(op, "u"); break;
            case Operation::delete_: EXPECT_EQ(op, "d"); break;
            case Operation::clear:
                EXPECT_EQ(op, "t");
                ++truncates;
                break;
            case Operation::schema: ADD_FAILURE() << "a schema change without schema_changes"; break;
        }
        EXPECT_EQ(ev.at("before"), c.previous);
        EXPECT_EQ(ev.at("after"), c.current);
        ASSERT_TRUE(ev.at("ts_ms").is_int64());
        EXPECT_GE(ev.at("ts_ms").as_int64(),
                  std::chrono::floor<std::chrono::milliseconds>(before_writes).time_since_epoch().count());
        const auto& src = ev.at("source").as_object();
        EXPECT_TRUE(src.at("version").is_string());
        EXPECT_EQ(src.at("connector").as_string(), "changefeed");
        EXPECT_EQ(src.at("name").as_string(), "to-debezium");
        EXPECT_EQ(src.at("db").as_string(), db);
        EXPECT_EQ(src.at("schema").as_string(), "public");
        EXPECT_EQ(src.at("table").as_string(), t);
        ASSERT_TRUE(src.at("txId").is_uint64() || src.at("txId").is_int64());
        EXPECT_EQ(src.at("txId").to_number<std::uint64_t>(), c.txid);
        EXPECT_EQ(src.at("sequence").as_string(), "[null,\"" + std::to_string(c.seq) + "\"]");
        ASSERT_TRUE(src.at("ts_ms").is_int64());
        EXPECT_EQ(src.at("ts_ms").as_int64(), micros(*c.written_at) / 1000);
        EXPECT_EQ(src.at("snapshot").as_string(), "false");
        EXPECT_LE(src.at("ts_ms").as_int64(), ev.at("ts_ms").as_int64());
    }
    EXPECT_EQ(truncates, 2);
    // The "u" of a replace carries the row before and after the write.
    const auto upd = ref.rec.of("5").back();
    const auto upd_ev = body_of(envelopes.at(upd.event_id));
    EXPECT_EQ(upd_ev.at("op").as_string(), "u");
    EXPECT_EQ(upd_ev.at("before").at("v").as_string(), "e");
    EXPECT_EQ(upd_ev.at("after").at("v").as_string(), "e2");
    expect_per_document_order(ref, pub.ids(), {"1", "2", "3", "4", "5", "6"});
    const auto s = bridge.stats();
    EXPECT_EQ(s.changes, 18);
    EXPECT_EQ(s.filtered, 6);  // the clears of ranges 1-3, twice
    EXPECT_EQ(s.published, 12);
}

// With schema_changes, a migration reaches the bridge in order with the data:
// one Debezium schema change event (range 0's), before the rows written in
// the new shape; CloudEvents maps each range's as "changefeed.schema".
TEST(Bridge, SchemaChangesArePublishedInOrderWithTheData) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 4);
    RecordingPublisher pub;
    auto idle = std::make_shared<cftest::CaughtUp>();
    auto o = counted_options("one", idle);
    o.schema_changes = true;
    changefeed::Bridge bridge({cluster().conninfo(), t}, "to-debezium", changefeed::debezium_mapper(), pub, o);
    bridge.start();
    ASSERT_TRUE(wait_bridge_running(bridge));
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (1, 'a')");
    cluster().exec("ALTER TABLE " + t + " ADD COLUMN note text");
    cluster().exec("INSERT INTO " + t + " (id, v, note) VALUES (2, 'b', 'n')");
    // 2 inserts, a schema change in 4 ranges (3 filtered out).
    ASSERT_TRUE(cftest::eventually([&] { return bridge.stats().changes >= 6; }));
    ASSERT_TRUE(read_to_the_end_again(*idle, 4));
    const auto got = pub.all();
    ASSERT_EQ(got.size(), 3u);
    int schema_at = -1, second_at = -1;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const auto ev = body_of(got[i]);
        if (ev.contains("tableChanges")) {
            schema_at = static_cast<int>(i);
            EXPECT_TRUE(ev.at("ddl").is_null());
            EXPECT_EQ(ev.at("schemaName").as_string(), "public");
            const auto& tc = ev.at("tableChanges").as_array().at(0).as_object();
            EXPECT_EQ(tc.at("type").as_string(), "ALTER");
            const auto& cols = tc.at("table").at("columns").as_array();
            EXPECT_EQ(cols.back().at("name").as_string(), "note");
            EXPECT_EQ(cols.back().at("typeName").as_string(), "text");
            EXPECT_EQ(tc.at("table").at("primaryKeyColumnNames").as_array().at(0).as_string(), "id");
            EXPECT_EQ(ev.at("changefeed").at("added").as_array().at(0).at("name").as_string(), "note");
        } else if (ev.at("after").at("id").as_int64() == 2) {
            second_at = static_cast<int>(i);
        }
    }
    // The order inside a range: the insert in the new shape comes after the
    // schema change when it is in range 0, and always after in its own range.
    ASSERT_GE(schema_at, 0);
    ASSERT_GE(second_at, 0);
    EXPECT_EQ(bridge.stats().filtered, 3);

    // CloudEvents: the schema change of a range as its own type, no subject.
    changefeed::Change c;
    c.operation = Operation::schema;
    c.event_id = "1.2.3";
    c.current = json::parse(R"({"version": 2, "added": [{"attnum": 4, "name": "note", "type": "text"}]})");
    changefeed::MapContext ctx;
    const auto ce = changefeed::cloudevents_mapper({"db", "public." + t})(c, ctx);
    ASSERT_EQ(ce.size(), 1u);
    const auto ev = body_of(ce[0]);
    EXPECT_EQ(ev.at("type").as_string(), "changefeed.schema");
    EXPECT_FALSE(ev.contains("subject"));
    EXPECT_EQ(ev.at("data").at("current").at("version").as_int64(), 2);
}

// The bridge reads the all-versions feed, which has no backfill: its options
// cannot ask for one.  The Debezium mapper still marks backfill rows "r" when
// it maps a latest-version feed's start_from_beginning, as here.
TEST(Bridge, NoBackfillOnTheBridgeAndReadRowsFromABackfill) {
    static_assert(!cftest::has_start_from_beginning<changefeed::BridgeOptions>);
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 2);
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (1, 'a'), (2, 'b')");
    const std::string db = current_database();
    const auto debezium = changefeed::debezium_mapper();
    const auto cloudevents = changefeed::cloudevents_mapper({db, "public." + t});
    std::mutex mu;
    std::vector<std::pair<changefeed::Change, changefeed::Envelope>> dbz, ce;
    changefeed::LatestVersionOptions o(cftest::fast_options("one"));
    o.start_from_beginning = true;
    auto p = changefeed::make_processor(
        {cluster().conninfo(), t}, "backfill",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            changefeed::MapContext mctx;
            static_cast<changefeed::Context&>(mctx) = ctx;
            mctx.source = {db, "public." + t};
            std::lock_guard lock(mu);
            for (const auto& c : batch) {
                for (auto& e : debezium(c, mctx)) dbz.emplace_back(c, e);
                for (auto& e : cloudevents(c, changefeed::MapContext{})) ce.emplace_back(c, e);
            }
        },
        o);
    p.start();
    ASSERT_TRUE(cftest::eventually([&] {
        std::lock_guard lock(mu);
        return dbz.size() == 2 && ce.size() == 2;
    }));
    std::lock_guard lock(mu);
    for (const auto& [c, e] : dbz) {
        ASSERT_TRUE(c.from_backfill);
        EXPECT_EQ(e.id, c.event_id);
        EXPECT_NE(e.id.find(".b"), std::string::npos) << e.id;
        const auto ev = body_of(e);
        EXPECT_EQ(ev.at("op").as_string(), "r");
        EXPECT_TRUE(ev.at("before").is_null());
        EXPECT_EQ(ev.at("after"), c.current);
        const auto& src = ev.at("source").as_object();
        EXPECT_EQ(src.at("snapshot").as_string(), "true");
        EXPECT_TRUE(src.at("txId").is_null());
        EXPECT_TRUE(src.at("sequence").is_null());
        EXPECT_TRUE(src.at("ts_ms").is_int64());
        EXPECT_EQ(src.at("name").as_string(), "backfill");
    }
    for (const auto& [c, e] : ce) {
        const auto ev = body_of(e);
        EXPECT_FALSE(ev.contains("time"));  // a backfill row has no write time
        EXPECT_EQ(ev.at("subject").as_string(), c.doc_id);
        EXPECT_EQ(ev.at("source").as_string(), "/" + db + "/public." + t);
    }
}

TEST(Bridge, AMapperFiltersOrMapsToSeveralEnvelopes) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 2);
    Reference ref(t);
    RecordingPublisher pub;
    // A mapper with a schema of its own: drops drafts, and sends every other
    // change to two consumers, each envelope with an id of its own.
    auto mapper = [](const changefeed::Change& c, const changefeed::Context&) {
        std::vector<changefeed::Envelope> out;
        if (c.has_current() && c.current.at("v").as_string() == "draft") return out;
        for (const char* to : {"audit", "search"}) {
            changefeed::Envelope e;
            e.id = c.event_id + "/" + to;
            e.subject = std::string("orders.") + to;
            e.body = json::serialize(json::object{{"order", c.doc_id}, {"to", to}});
            out.push_back(std::move(e));
        }
        return out;
    };
    auto idle = std::make_shared<cftest::CaughtUp>();
    changefeed::Bridge bridge({cluster().conninfo(), t}, "own-schema", mapper, pub, counted_options("one", idle));
    bridge.start();
    ASSERT_TRUE(wait_bridge_running(bridge));
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (1, 'draft'), (2, 'placed'), (3, 'draft')");
    cluster().exec("UPDATE " + t + " SET v = 'placed' WHERE id = 3");
    ASSERT_TRUE(cftest::eventually([&] { return ref.rec.size() == 4 && bridge.stats().changes == 4; }));
    ASSERT_TRUE(read_to_the_end_again(*idle, 2));  // nothing more may come
    std::set<std::string> expected;
    for (const auto& h : ref.rec.all()) {
        if (h.change.current.at("v").as_string() == "draft") continue;
        expected.insert(h.change.event_id + "/audit");
        expected.insert(h.change.event_id + "/search");
    }
    EXPECT_EQ(pub.ids().size(), 4u);
    EXPECT_EQ(pub.unique_ids(), expected);
    for (const auto& e : pub.all()) {
        EXPECT_EQ(e.subject, "orders." + e.id.substr(e.id.rfind('/') + 1));
        EXPECT_EQ(e.table, "");  // a user's mapper says what it wants
    }
    const auto s = bridge.stats();
    EXPECT_EQ(s.filtered, 2);
    EXPECT_EQ(s.published, 4);
}

TEST(Bridge, AMapperThatThrowsFailsTheBatchLikeAHandler) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 1);
    Reference ref(t);
    RecordingPublisher pub;
    cftest::ErrorLog errors;
    std::atomic<bool> broken{true};
    std::atomic<int> mapped{0};
    const auto ce = changefeed::cloudevents_mapper();
    auto mapper = [&](const changefeed::Change& c, const changefeed::MapContext& ctx) {
        ++mapped;
        if (broken && c.doc_id == "2") throw std::runtime_error("cannot map order 2");
        return ce(c, ctx);
    };
    auto o = bridge_options("one");
    o.on_error = errors.sink();
    changefeed::Bridge bridge({cluster().conninfo(), t}, "mapper-fails", mapper, pub, o);
    bridge.start();
    ASSERT_TRUE(wait_bridge_running(bridge));
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c')");  // one batch
    ASSERT_TRUE(cftest::eventually([&] { return bridge.stats().mapper_failures >= 3; }));
    EXPECT_TRUE(errors.has(changefeed::errc::handler_failed));
    bool named = false;
    for (const auto& m : errors.messages(changefeed::errc::handler_failed))
        named = named || m.find("cannot map order 2") != std::string::npos;
    EXPECT_TRUE(named);
    EXPECT_EQ(pub.calls(), 0);                 // nothing of the batch was published
    EXPECT_EQ(pending(t, "mapper-fails"), 3);  // nor checkpointed
    EXPECT_EQ(bridge.stats().changes, 0);
    broken = false;
    ASSERT_TRUE(cftest::eventually([&] { return pub.ids().size() == 3; }));
    ASSERT_TRUE(cftest::eventually([&] { return pending(t, "mapper-fails") == 0; }));
    std::set<std::string> expected;
    for (const auto& h : ref.rec.all()) expected.insert(h.change.event_id);
    EXPECT_EQ(pub.unique_ids(), expected);
    EXPECT_EQ(pub.ids().size(), 3u);
    const auto s = bridge.stats();
    EXPECT_GE(s.mapper_failures, 3);
    EXPECT_EQ(s.changes, 3);
    EXPECT_EQ(s.published, 3);
    EXPECT_EQ(bridge.state(), changefeed::State::running);
}

TEST(Bridge, APublisherDownPausesWithoutCheckpointingThenNothingIsLost) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 2);
    Reference ref(t);
    RecordingPublisher pub;
    pub.down = true;
    pub.store_before_failing = true;  // the broker keeps part of each batch before it fails
    cftest::ErrorLog errors;
    std::vector<changefeed::State> states;
    auto o = bridge_options("one");
    o.on_error = errors.sink();
    changefeed::Bridge bridge({cluster().conninfo(), t}, "publisher-down", changefeed::cloudevents_mapper(), pub, o);
    bridge.start();
    ASSERT_TRUE(wait_bridge_running(bridge));
    for (int i = 1; i <= 20; i += 4)
        cluster().exec("INSERT INTO " + t + " (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(i) + ", " +
                       std::to_string(i + 3) + ") g");
    cluster().exec("UPDATE " + t + " SET v = 'y' WHERE id <= 5");
    ASSERT_TRUE(cftest::eventually([&] { return ref.rec.size() == 25; }));
    ASSERT_TRUE(cftest::eventually([&] { return bridge.stats().publish_failures >= 4; }));
    EXPECT_TRUE(errors.has(changefeed::errc::publish_failed));
    EXPECT_EQ(bridge.state(), changefeed::State::resuming);
    EXPECT_EQ(pending(t, "publisher-down"), 25);  // nothing checkpointed while it fails
    EXPECT_EQ(bridge.stats().published, 0);
    EXPECT_GE(pub.ids().size(), 1u);  // what the broker kept before failing

    pub.down = false;
    std::set<std::string> expected;
    for (const auto& h : ref.rec.all()) expected.insert(h.change.event_id);
    ASSERT_TRUE(cftest::eventually([&] { return pub.unique_ids() == expected; }));
    ASSERT_TRUE(cftest::eventually([&] { return pending(t, "publisher-down") == 0; }));
    EXPECT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
    const auto ids = pub.ids();
    const std::size_t duplicates = ids.size() - pub.unique_ids().size();
    // What the broker kept before each failure went again, under the same id.
    EXPECT_GE(duplicates, 1u);
    EXPECT_EQ(duplicates, static_cast<std::size_t>(bridge.stats().publish_failures));
    std::vector<std::string> docs;
    for (int i = 1; i <= 20; ++i) docs.push_back(std::to_string(i));
    expect_per_document_order(ref, ids, docs);
    std::printf("publisher down: %zu envelopes for %zu changes, %zu duplicates, %lld failed publishes\n", ids.size(),
                expected.size(), duplicates, static_cast<long long>(bridge.stats().publish_failures));
}

// Published but not confirmed (the acknowledgement was lost), then the
// service restarts: the batch is published again with the same ids and the
// same CloudEvents bodies.
TEST(Bridge, ARedeliveryAfterARestartRepublishesTheSameIds) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 1);
    Reference ref(t);
    RecordingPublisher first;
    first.down = true;
    first.store_before_failing = true;
    first.store_all_before_failing = true;
    cftest::ErrorLog errors;
    {
        auto o = bridge_options("one");
        o.on_error = errors.sink();
        changefeed::Bridge bridge({cluster().conninfo(), t}, "restarted", changefeed::cloudevents_mapper(), first, o);
        bridge.start();
        ASSERT_TRUE(wait_bridge_running(bridge));
        // One range, one transaction: one batch, which the broker stores whole
        // before the acknowledgement is lost.
        cluster().exec("INSERT INTO " + t +
                       " (id, v) SELECT g, 'x' FROM generate_series(1, 6) g;"
                       "DELETE FROM " +
                       t + " WHERE id = 6");
        ASSERT_TRUE(cftest::eventually([&] { return ref.rec.size() == 7 && first.unique_ids().size() == 7; }))
            << ref.rec.size() << " changes, " << first.unique_ids().size() << " ids, " << first.calls() << " calls";
        bridge.stop();
    }
    EXPECT_EQ(pending(t, "restarted"), 7);
    RecordingPublisher second;
    changefeed::Bridge bridge({cluster().conninfo(), t}, "restarted", changefeed::cloudevents_mapper(), second,
                              bridge_options("two"));
    bridge.start();
    ASSERT_TRUE(cftest::eventually([&] { return second.unique_ids().size() == 7; }));
    ASSERT_TRUE(cftest::eventually([&] { return pending(t, "restarted") == 0; }));
    EXPECT_EQ(second.unique_ids(), first.unique_ids());
    const auto before = by_id(first.all());
    for (const auto& e : second.all()) EXPECT_EQ(e.body, before.at(e.id).body) << e.id;
    std::set<std::string> expected;
    for (const auto& h : ref.rec.all()) expected.insert(h.change.event_id);
    EXPECT_EQ(second.unique_ids(), expected);
}

// A backlog written before the bridge starts, and changes written while it
// is idle, are published on wake-ups alone: with a poll interval of an hour,
// a start or a write that waited for a poll would miss the deadline.  Several
// starts, as each start races its lease thread's first steps.
TEST(Bridge, ABacklogAndIdleWritesArePublishedWithoutWaitingForAPoll) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 4);
    for (int round = 0; round < 4; ++round) {
        const std::string name = "no-poll-" + std::to_string(round);
        // The leases exist before the backlog, so the bridge starts before it.
        cluster().exec("SELECT changefeed.lease_init('" + t + "', '" + name + "')");
        const int from = round * 1000;
        cluster().exec("INSERT INTO " + t + " (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(from + 1) +
                       ", " + std::to_string(from + 300) + ") g");
        RecordingPublisher pub;
        auto o = bridge_options("one");
        o.poll_interval = std::chrono::hours(1);
        changefeed::Bridge bridge({cluster().conninfo(), t}, name, changefeed::cloudevents_mapper(), pub, o);
        bridge.start();
        ASSERT_TRUE(cftest::eventually([&] { return pub.unique_ids().size() == 300; }, 60s))
            << "round " << round << ": " << pub.unique_ids().size() << " of the backlog's 300 published";
        // Idle now: what is written next comes by the notifier's wake-up.
        cluster().exec("UPDATE " + t + " SET v = 'y' WHERE id BETWEEN " + std::to_string(from + 1) + " AND " +
                       std::to_string(from + 10));
        ASSERT_TRUE(cftest::eventually([&] { return pub.unique_ids().size() == 310; }, 60s))
            << "round " << round << ": " << pub.unique_ids().size() - 300 << " of 10 idle writes published";
        bridge.stop();
        EXPECT_EQ(pending(t, name), 0) << "round " << round;
    }
}

// The worker reads only while the lease view is valid, which the first
// renewal makes it; here that renewal's answer comes after the first
// acquire's (held by a trigger on an advisory lock the test holds), as it
// sometimes does on its own.  The renewal must wake the reading: nothing else
// does within the hour's poll.
TEST(Bridge, ABacklogIsPublishedOnceTheLeasesAreRenewedWithoutWaitingForAPoll) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 4);
    const std::string name = "renewed";
    cluster().exec("SELECT changefeed.lease_init('" + t + "', '" + name + "')");
    cluster().exec("INSERT INTO " + t + " (id, v) SELECT g, 'x' FROM generate_series(1, 200) g");
    // A renewal moves the instance's expiry (the first acquire inserts it).
    cluster().exec("CREATE FUNCTION br_hold_renewal() RETURNS trigger LANGUAGE plpgsql AS"
                   " $$ BEGIN PERFORM pg_catalog.pg_advisory_xact_lock(31005); RETURN NEW; END $$;"
                   "CREATE TRIGGER br_hold_renewal BEFORE UPDATE ON changefeed.holder FOR EACH ROW"
                   " WHEN (NEW.processor = '" +
                   name +
                   "' AND OLD.expires_at IS DISTINCT FROM NEW.expires_at)"
                   " EXECUTE FUNCTION br_hold_renewal()");
    pqxx::connection holder(cluster().conninfo());
    pqxx::work hold(holder);
    hold.exec("SELECT pg_advisory_xact_lock(31005)");

    RecordingPublisher pub;
    auto o = bridge_options("one");
    o.poll_interval = std::chrono::hours(1);
    o.maintain_interval = 0ms;
    changefeed::Bridge bridge({cluster().conninfo(), t}, name, changefeed::cloudevents_mapper(), pub, o);
    bridge.start();
    // Running: the worker has seen the first acquire's answer.  Then the
    // renewal waits for the lock; the worker reads nothing meanwhile (its
    // view is not valid yet), and no LISTEN wakes it (the long poll is its
    // wake-up, and it has not begun).
    ASSERT_TRUE(wait_bridge_running(bridge));
    ASSERT_TRUE(cftest::eventually([&] {
        return cluster()
                   .exec("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                         " AND query LIKE '%lease_keep%'")[0][0]
                   .as<int>() > 0;
    }));
    std::this_thread::sleep_for(500ms);
    hold.commit();
    const bool published = cftest::eventually([&] { return pub.unique_ids().size() == 200; }, 60s);
    bridge.stop();
    cluster().exec("DROP TRIGGER br_hold_renewal ON changefeed.holder; DROP FUNCTION br_hold_renewal()");
    EXPECT_TRUE(published) << pub.unique_ids().size() << " of the backlog's 200 published";
}

// A pipelining publisher: every batch of a read is sent before the bridge
// waits for a confirmation, nothing is checkpointed before it came, and a
// confirmation that failed sends everything in flight again in the same
// order with the same ids.  A bridge stopped while confirmations fail
// checkpoints nothing, and the next one publishes it all again.
TEST(Bridge, APipelinedPublisherConfirmsBeforeTheCheckpointAndResendsInOrder) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 4);
    Reference ref(t);
    PipelinedRecorder pub;
    pub.hold = true;
    cftest::ErrorLog errors;
    auto o = bridge_options("one");
    o.on_error = errors.sink();
    o.max_batch_size = 10;  // 200 changes: about 20 batches over 4 ranges, all in one read
    {
        changefeed::Bridge bridge({cluster().conninfo(), t}, "pipelined", changefeed::cloudevents_mapper(), pub, o);
        // A failed assertion must not leave the bridge's stop waiting for a confirmation.
        struct Unblock {
            PipelinedRecorder& p;
            ~Unblock() { p.release(); }
        } unblock{pub};
        bridge.start();
        ASSERT_TRUE(wait_bridge_running(bridge));
        cluster().exec("INSERT INTO " + t +
                       " (id, v) SELECT g, 'x' FROM generate_series(1, 150) g;"
                       "UPDATE " +
                       t + " SET v = 'y' WHERE id <= 50");
        ASSERT_TRUE(cftest::eventually([&] { return ref.rec.size() == 200; }));
        // All of the read sent, its confirmation awaited, nothing checkpointed.
        ASSERT_TRUE(cftest::eventually([&] { return pub.unique_sent().size() == 200 && pub.confirms() == 1; }))
            << pub.unique_sent().size() << " sent, " << pub.confirms() << " confirmations asked";
        EXPECT_EQ(pub.sent().size(), 200u);
        EXPECT_EQ(pending(t, "pipelined"), 200);
        EXPECT_EQ(bridge.stats().published, 0);

        // The confirmation fails (twice or more), then succeeds.
        pub.down = true;
        pub.release();
        ASSERT_TRUE(cftest::eventually([&] { return pub.failed_confirms() >= 3; }));
        EXPECT_EQ(pending(t, "pipelined"), 200);
        EXPECT_EQ(bridge.state(), changefeed::State::resuming);
        pub.down = false;
        ASSERT_TRUE(cftest::eventually([&] { return pending(t, "pipelined") == 0; }));
        EXPECT_TRUE(errors.has(changefeed::errc::publish_failed));
        EXPECT_EQ(bridge.stats().published, 200);
        EXPECT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
        const auto sent = pub.sent();
        ASSERT_EQ(sent.size() % 200, 0u);
        ASSERT_GE(sent.size(), 800u);  // the first sending and three or more again
        const std::vector<std::string> first(sent.begin(), sent.begin() + 200);
        for (std::size_t i = 200; i < sent.size(); i += 200)
            EXPECT_EQ(std::vector<std::string>(sent.begin() + static_cast<std::ptrdiff_t>(i),
                                               sent.begin() + static_cast<std::ptrdiff_t>(i + 200)),
                      first)
                << "sent again from " << i;
        std::vector<std::string> docs;
        for (int i = 1; i <= 50; ++i) docs.push_back(std::to_string(i));
        expect_per_document_order(ref, first, docs);

        // Stopped while the confirmations fail: nothing checkpointed.
        pub.down = true;
        cluster().exec("UPDATE " + t + " SET v = 'z' WHERE id <= 30");
        ASSERT_TRUE(cftest::eventually([&] { return ref.rec.size() == 230 && pub.unique_sent().size() == 230; }));
        const int failed_before = pub.failed_confirms();
        ASSERT_TRUE(cftest::eventually([&] { return pub.failed_confirms() > failed_before; }));
        bridge.stop();
        EXPECT_EQ(pending(t, "pipelined"), 30);
    }
    PipelinedRecorder next;
    changefeed::Bridge bridge({cluster().conninfo(), t}, "pipelined", changefeed::cloudevents_mapper(), next,
                              bridge_options("two"));
    bridge.start();
    ASSERT_TRUE(cftest::eventually([&] { return pending(t, "pipelined") == 0; }));
    std::set<std::string> last;
    for (const auto& h : ref.rec.all())
        if (h.change.current.is_object() && h.change.current.as_object().at("v") == "z") last.insert(h.change.event_id);
    EXPECT_EQ(next.unique_sent(), last);
}

TEST(Bridge, OptionsAndSourcesAreValidated) {
    const std::string t = cftest::test_table("br");
    cftest::create_table(cluster(), t, 2);
    RecordingPublisher pub;
    const changefeed::Collection col{cluster().conninfo(), t};
    const auto invalid = make_error_code(changefeed::errc::invalid_option);
    EXPECT_EQ(cftest::code_of([&] { changefeed::Bridge b(col, "b", changefeed::Mapper{}, pub); }), invalid);
    auto o = bridge_options("one");
    o.publish_retry_min = 0ms;
    EXPECT_EQ(cftest::code_of([&] { changefeed::Bridge b(col, "b", changefeed::cloudevents_mapper(), pub, o); }),
              invalid);
    o = bridge_options("one");
    o.publish_retry_min = 2s;
    o.publish_retry_max = 1s;
    EXPECT_EQ(cftest::code_of([&] { changefeed::Bridge b(col, "b", changefeed::cloudevents_mapper(), pub, o); }),
              invalid);
    o = bridge_options("one");
    o.max_batch_size = 0;  // the processor's own checks apply
    EXPECT_EQ(cftest::code_of([&] { changefeed::Bridge b(col, "b", changefeed::cloudevents_mapper(), pub, o); }),
              invalid);
    EXPECT_EQ(cftest::code_of([&] { changefeed::Bridge b(col, "", changefeed::cloudevents_mapper(), pub); }),
              make_error_code(changefeed::errc::processor_name_empty));
    // A table without its schema, for either mapper.
    EXPECT_EQ(cftest::code_of([&] { changefeed::cloudevents_mapper({"shop", "orders"}); }), invalid);
    EXPECT_EQ(cftest::code_of([&] { changefeed::debezium_mapper({"shop", ".orders"}); }), invalid);
    // A ready mapper run outside a bridge without a source.
    changefeed::Change c;
    c.event_id = "1.2.3";
    EXPECT_EQ(cftest::code_of([&] { changefeed::cloudevents_mapper()(c, changefeed::MapContext{}); }), invalid);
    EXPECT_EQ(cftest::code_of([&] {
                  changefeed::debezium_mapper({"shop", ""})(c, changefeed::MapContext{});
              }),
              invalid);
    // Given fields win over the bridge's; the others come from it.
    changefeed::MapContext ctx;
    ctx.source = {"db1", "public.t1"};
    const auto ev = body_of(changefeed::cloudevents_mapper({"shop", ""})(c, ctx).at(0));
    EXPECT_EQ(ev.at("source").as_string(), "/shop/public.t1");
    // start() on a missing table, or on one that is not enabled.
    changefeed::Bridge missing({cluster().conninfo(), "br_no_such_table"}, "b", changefeed::cloudevents_mapper(), pub,
                               bridge_options("one"));
    EXPECT_EQ(cftest::code_of([&] { missing.start(); }), make_error_code(changefeed::errc::collection_not_found));
    cluster().exec("CREATE TABLE br_plain (id int PRIMARY KEY)");
    changefeed::Bridge plain({cluster().conninfo(), "br_plain"}, "b", changefeed::cloudevents_mapper(), pub,
                             bridge_options("one"));
    EXPECT_EQ(cftest::code_of([&] { plain.start(); }), make_error_code(changefeed::errc::collection_not_enabled));
}

}  // namespace
