// The all-versions-and-deletes feed: every write, in order per document,
// deletes carrying the previous version.
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("allversions", CF_TEST_PORT, true);

namespace {

TEST(AllVersions, EveryWriteArrivesInOrderWithDeletes) {
    cftest::create_table(cluster(), "av_audit", 4);
    cftest::Recorder rec;
    auto p = changefeed::make_processor({cluster().conninfo(), "av_audit"}, "audit", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("one")));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
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
    EXPECT_EQ(changes[2].operation, changefeed::Operation::delete_);
    EXPECT_TRUE(changes[2].current.is_null());
    EXPECT_EQ(changes[2].previous.at("v").as_string(), "b");
    EXPECT_LT(changes[0].seq, changes[1].seq);
    EXPECT_LT(changes[1].seq, changes[2].seq);
}

// written_at is the writing transaction's start (now() in it), to the microsecond.
TEST(AllVersions, WrittenAtIsTheWritingTransactionsStart) {
    cftest::create_table(cluster(), "av_time", 2);
    cftest::Recorder rec;
    auto p = changefeed::make_processor({cluster().conninfo(), "av_time"}, "audit", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("one")));
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::running; }));
    auto before = std::chrono::system_clock::now();
    cluster().exec("INSERT INTO av_time (id, v) VALUES (1, (extract(epoch FROM now()) * 1000000)::bigint::text)");
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 1; }));
    auto c = rec.of("1")[0];
    ASSERT_TRUE(c.written_at.has_value());
    auto now_us = std::stoll(std::string(c.current.at("v").as_string()));
    EXPECT_EQ(std::chrono::duration_cast<std::chrono::microseconds>(c.written_at->time_since_epoch()).count(), now_us);
    // Same machine, same clock: within a generous minute of the client's view.
    EXPECT_LT(std::chrono::abs(*c.written_at - before), std::chrono::minutes(1));
}

}  // namespace

namespace {

using changefeed::Operation;

changefeed::Processor running_audit(const std::string& table, cftest::Recorder& rec,
                                    changefeed::ProcessorOptions o = cftest::fast_options("one")) {
    auto p = changefeed::make_processor({cluster().conninfo(), table}, "audit", rec.handler(),
                                        changefeed::AllVersionsOptions(o));
    p.start();
    EXPECT_TRUE(cftest::wait_running(p));
    return p;
}

// With schema_changes, a migration is a change in every range, in order with
// the data: each range's rows before it have the old shape, those after the
// new one.  Without it nothing of the kind arrives.
TEST(AllVersions, SchemaChangesArriveInOrderWithTheData) {
    cftest::create_table(cluster(), "av_schema", 2);
    cftest::Recorder rec, plain;
    changefeed::AllVersionsOptions o(cftest::fast_options("one"));
    o.schema_changes = true;
    auto p = changefeed::make_processor({cluster().conninfo(), "av_schema"}, "schema-audit", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    auto q = running_audit("av_schema", plain);
    cluster().exec("INSERT INTO av_schema (id, v) VALUES (1, 'a')");
    cluster().exec("ALTER TABLE av_schema ADD COLUMN note text");
    cluster().exec("UPDATE av_schema SET note = 'n' WHERE id = 1");
    cluster().exec("ALTER TABLE av_schema RENAME COLUMN note TO remark");
    cluster().exec("UPDATE av_schema SET remark = 'm' WHERE id = 1");
    cluster().exec("ALTER TABLE av_schema DROP COLUMN remark");
    cluster().exec("DELETE FROM av_schema WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.size() == 4 + 3 * 2 && plain.size() == 4; }));
    for (const auto& h : plain.all()) EXPECT_NE(h.change.operation, Operation::schema);

    const int range = rec.of("1").front().range_id;
    std::vector<changefeed::Change> mine, other;
    for (const auto& h : rec.all()) (h.change.range_id == range ? mine : other).push_back(h.change);
    ASSERT_EQ(mine.size(), 7u);
    const std::vector<Operation> ops{Operation::create,  Operation::schema, Operation::replace, Operation::schema,
                                     Operation::replace, Operation::schema, Operation::delete_};
    for (std::size_t i = 0; i < ops.size(); ++i) EXPECT_EQ(mine[i].operation, ops[i]) << i;
    ASSERT_EQ(other.size(), 3u);
    for (const auto& c : other) EXPECT_EQ(c.operation, Operation::schema);

    const auto& added = mine[1].current.as_object();
    const auto version = added.at("version").as_int64();
    EXPECT_EQ(added.at("previous_version").as_int64(), version - 1);
    EXPECT_TRUE(mine[1].doc_id.empty());
    EXPECT_EQ(added.at("added").as_array().at(0).at("name").as_string(), "note");
    EXPECT_EQ(added.at("added").as_array().at(0).at("type").as_string(), "text");
    EXPECT_EQ(mine[2].current.at("note").as_string(), "n");
    const auto& renamed = mine[3].current.as_object();
    EXPECT_EQ(renamed.at("version").as_int64(), version + 1);
    EXPECT_EQ(renamed.at("renamed").as_array().at(0).at("from").as_string(), "note");
    EXPECT_EQ(renamed.at("renamed").as_array().at(0).at("to").as_string(), "remark");
    EXPECT_EQ(mine[4].current.at("remark").as_string(), "m");
    const auto& dropped = mine[5].current.as_object();
    EXPECT_EQ(dropped.at("version").as_int64(), version + 2);
    EXPECT_EQ(dropped.at("dropped").as_array().at(0).at("name").as_string(), "remark");
    EXPECT_EQ(dropped.at("key").as_array().at(0).as_string(), "id");
    EXPECT_FALSE(mine[6].previous.as_object().contains("remark"));
    // Every range's copy of a schema change is the same change.
    EXPECT_EQ(other[0].current, mine[1].current);
    EXPECT_EQ(other[2].current, mine[5].current);
}

TEST(AllVersions, PreviousImagesSeqAndCommitWindow) {
    cftest::create_table(cluster(), "av_images", 4);
    cftest::Recorder rec;
    auto p = running_audit("av_images", rec);
    cluster().exec("INSERT INTO av_images (id, v) VALUES (1, 'a')");
    // Two writes in one transaction share their commit window.
    cluster().exec("UPDATE av_images SET v = 'b' WHERE id = 1; UPDATE av_images SET v = 'c' WHERE id = 1");
    cluster().exec("DELETE FROM av_images WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 4; }));
    auto c = rec.of("1");
    EXPECT_EQ(c[0].operation, Operation::create);
    EXPECT_TRUE(c[0].has_current());
    EXPECT_FALSE(c[0].has_previous());  // a create has no previous, not an empty one
    EXPECT_EQ(c[1].operation, Operation::replace);
    EXPECT_EQ(c[1].previous.at("v").as_string(), "a");
    EXPECT_EQ(c[1].current.at("v").as_string(), "b");
    EXPECT_EQ(c[2].previous.at("v").as_string(), "b");
    EXPECT_EQ(c[2].current.at("v").as_string(), "c");
    EXPECT_EQ(c[3].operation, Operation::delete_);
    EXPECT_FALSE(c[3].has_current());
    EXPECT_EQ(c[3].previous.at("v").as_string(), "c");
    EXPECT_EQ(c[3].previous.at("id").as_int64(), 1);
    for (const auto& ch : c) {
        EXPECT_FALSE(ch.ttl_expired);
        EXPECT_GT(ch.txid, 0u);
        EXPECT_FALSE(ch.from_backfill);
    }
    EXPECT_EQ(c[1].txid, c[2].txid);
    EXPECT_NE(c[0].txid, c[1].txid);
    EXPECT_LT(c[0].txid, c[3].txid);
    EXPECT_LT(c[1].seq, c[2].seq);
    EXPECT_LT(c[2].seq, c[3].seq);
}

TEST(AllVersions, TruncateArrivesAsClear) {
    cftest::create_table(cluster(), "av_clear", 2);
    cftest::Recorder rec;
    auto p = running_audit("av_clear", rec);
    cluster().exec("INSERT INTO av_clear (id, v) VALUES (1, 'a')");
    cluster().exec("TRUNCATE av_clear");
    ASSERT_TRUE(cftest::eventually([&] {
        for (const auto& h : rec.all())
            if (h.change.operation == Operation::clear) return true;
        return false;
    }));
    for (const auto& h : rec.all()) {
        if (h.change.operation != Operation::clear) continue;
        EXPECT_FALSE(h.change.has_current());
        EXPECT_FALSE(h.change.has_previous());
        EXPECT_EQ(h.change.range_id, h.context.range_id);
    }
}

TEST(AllVersions, WithoutPreviousImages) {
    cluster().exec("CREATE TABLE av_noprev (id int PRIMARY KEY, v text);"
                   "SELECT changefeed.enable('av_noprev', ranges => 2, keep_previous => false)");
    cftest::Recorder rec;
    auto p = running_audit("av_noprev", rec);
    cluster().exec("INSERT INTO av_noprev VALUES (1, 'a')");
    cluster().exec("UPDATE av_noprev SET v = 'b' WHERE id = 1");
    cluster().exec("DELETE FROM av_noprev WHERE id = 1");
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 3; }));
    auto c = rec.of("1");
    EXPECT_EQ(c[1].operation, Operation::replace);
    EXPECT_EQ(c[1].current.at("v").as_string(), "b");
    EXPECT_FALSE(c[1].has_previous());  // not kept: absent, never a stand-in
    EXPECT_EQ(c[2].operation, Operation::delete_);
    EXPECT_FALSE(c[2].has_current());
    EXPECT_FALSE(c[2].has_previous());
    EXPECT_EQ(c[2].doc_id, "1");  // the id still says what was deleted
}

TEST(AllVersions, TtlDeletesAreMarked) {
    cluster().exec("CREATE TABLE av_ttl (id int PRIMARY KEY, expires_at timestamptz);"
                   "SELECT changefeed.enable('av_ttl', ranges => 2, ttl_column => 'expires_at')");
    cluster().exec("INSERT INTO av_ttl VALUES (1, now() + interval '1 hour'), (2, now() + interval '1 hour'),"
                   " (3, NULL)");
    cftest::Recorder rec;
    auto p = running_audit("av_ttl", rec);
    cluster().exec("UPDATE av_ttl SET expires_at = now() - interval '1 second' WHERE id = 1");
    cluster().exec("SELECT changefeed.maintain()");
    cluster().exec("DELETE FROM av_ttl WHERE id = 2");
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 2 && rec.of("2").size() == 1; }));
    auto expired = rec.of("1").back();
    EXPECT_EQ(expired.operation, Operation::delete_);
    EXPECT_TRUE(expired.ttl_expired);
    EXPECT_TRUE(expired.has_previous());
    EXPECT_FALSE(rec.of("2")[0].ttl_expired);  // an explicit delete
    EXPECT_FALSE(rec.has("3"));                // no TTL value: never expires
}

TEST(AllVersions, ProcessorsRunMaintenanceThemselves) {
    cluster().exec("CREATE TABLE av_maint (id int PRIMARY KEY, expires_at timestamptz);"
                   "SELECT changefeed.enable('av_maint', ranges => 2, ttl_column => 'expires_at')");
    cluster().exec("INSERT INTO av_maint VALUES (1, now() + interval '1 hour')");
    cftest::Recorder rec;
    auto o = cftest::fast_options("one");
    o.maintain_interval = std::chrono::milliseconds(200);
    auto p = running_audit("av_maint", rec, o);
    cluster().exec("UPDATE av_maint SET expires_at = now() - interval '1 second'");
    // No maintain() call here: the processor's own expires the row.
    ASSERT_TRUE(cftest::eventually([&] {
        auto c = rec.of("1");
        return !c.empty() && c.back().operation == Operation::delete_;
    }));
    EXPECT_TRUE(rec.of("1").back().ttl_expired);
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM av_maint")[0][0].as<int>(), 0);
}

TEST(AllVersions, OrderPerKeyAcrossRangesUnderConcurrentWriters) {
    cluster().exec("CREATE TABLE av_order (id int PRIMARY KEY, n int NOT NULL);"
                   "INSERT INTO av_order SELECT g, 0 FROM generate_series(1, 24) g;"
                   "SELECT changefeed.enable('av_order', ranges => 16)");
    cftest::Recorder rec;
    auto o = cftest::fast_options("one");
    o.max_batch_size = 7;  // many pages, many windows
    auto p = running_audit("av_order", rec, o);
    constexpr int writers = 4, txs = 60;
    std::vector<std::thread> threads;
    for (int w = 0; w < writers; ++w) {
        threads.emplace_back([w] {
            pqxx::connection c(cluster().conninfo());
            for (int i = 0; i < txs; ++i) {
                pqxx::work tx(c);
                // Every writer hits every key: the row lock orders the writes.
                int a = 1 + (i * 7 + w) % 24, b = 1 + (i * 11 + w * 5) % 24;
                if (b < a) std::swap(a, b);  // one lock order: no deadlocks
                tx.exec("UPDATE av_order SET n = n + 1 WHERE id = " + std::to_string(a));
                if (b != a) tx.exec("UPDATE av_order SET n = n + 1 WHERE id = " + std::to_string(b));
                tx.commit();
            }
        });
    }
    for (auto& t : threads) t.join();
    std::map<std::string, int> final_n;
    for (const auto& row : cluster().exec("SELECT id::text, n FROM av_order"))
        final_n[row[0].as<std::string>()] = row[1].as<int>();
    ASSERT_TRUE(cftest::eventually([&] {
        auto counts = rec.counts();
        for (const auto& [id, n] : final_n)
            if (counts[id] < n) return false;
        return true;
    }));
    std::set<int> ranges_seen;
    for (const auto& [id, n] : final_n) {
        auto c = rec.of(id);
        ASSERT_EQ(static_cast<int>(c.size()), n) << "doc " << id;
        for (int k = 0; k < n; ++k) {
            EXPECT_EQ(c[k].current.at("n").as_int64(), k + 1) << "doc " << id;
            EXPECT_EQ(c[k].previous.at("n").as_int64(), k) << "doc " << id;
            if (k > 0) EXPECT_LT(c[k - 1].seq, c[k].seq);
        }
        ranges_seen.insert(c[0].range_id);
    }
    EXPECT_GT(ranges_seen.size(), 4u);
}

}  // namespace
