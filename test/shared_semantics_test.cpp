// The semantics both providers share, proved by running one suite against
// PostgreSQL and against the in-memory provider (typed tests).
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <atomic>
#include <chrono>

using namespace std::chrono_literals;
using changefeed::Operation;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("shared", CF_TEST_PORT, true);

namespace {

// Which feed a test reads (chosen in the library by the options' type).
enum class FeedMode { latest_version, all_versions_and_deletes };


// Documents are {"id": int, "v": text} on both sides.
class PostgresProvider {
public:
    PostgresProvider() : table_("shared_" + std::to_string(++counter_)) {
        cluster().exec("CREATE TABLE " + table_ + " (id int PRIMARY KEY, v text);"
                       "SELECT changefeed.enable('" + table_ + "', ranges => 4)");
    }
    void insert(int id, const std::string& v) {
        exec("INSERT INTO " + table_ + " VALUES (" + std::to_string(id) + ", " + quoted(v) + ")");
    }
    void update(int id, const std::string& v) {
        exec("UPDATE " + table_ + " SET v = " + quoted(v) + " WHERE id = " + std::to_string(id));
    }
    void remove(int id) { exec("DELETE FROM " + table_ + " WHERE id = " + std::to_string(id)); }
    changefeed::Processor processor(const std::string& name, changefeed::Handler h, changefeed::LatestVersionOptions o,
                                    FeedMode mode) {
        changefeed::Collection c(cluster().conninfo(), table_);
        if (mode == FeedMode::latest_version) return changefeed::Processor(c, name, std::move(h), std::move(o));
        return changefeed::Processor(c, name, std::move(h), cftest::common_options(std::move(o)));
    }

private:
    static std::string quoted(const std::string& v) { return "'" + v + "'"; }  // test constants only
    pqxx::connection& conn() {
        if (!conn_) conn_ = std::make_unique<pqxx::connection>(cluster().conninfo());
        return *conn_;
    }
    void exec(const std::string& sql) {
        pqxx::work tx(conn());
        tx.exec(sql);
        tx.commit();
    }
    static inline int counter_ = 0;
    std::string table_;
    std::unique_ptr<pqxx::connection> conn_;
};

class MemoryProvider {
public:
    void insert(int id, const std::string& v) { coll_.create({{"id", id}, {"v", v}}); }
    void update(int id, const std::string& v) { coll_.replace({{"id", id}, {"v", v}}); }
    void remove(int id) { coll_.delete_(std::to_string(id)); }
    changefeed::Processor processor(const std::string& name, changefeed::Handler h, changefeed::LatestVersionOptions o,
                                    FeedMode mode) {
        if (mode == FeedMode::latest_version) return coll_.make_processor(name, std::move(h), std::move(o));
        return coll_.make_processor(name, std::move(h), cftest::common_options(std::move(o)));
    }

private:
    changefeed::InMemoryCollection coll_;
};

template <class P>
class SharedSemantics : public ::testing::Test {
protected:
    P provider;
    changefeed::Processor start(const std::string& name, cftest::Recorder& rec,
                                FeedMode mode = FeedMode::latest_version,
                                changefeed::LatestVersionOptions o = cftest::fast_options("one")) {
        auto p = provider.processor(name, rec.handler(), std::move(o), mode);
        p.start();
        EXPECT_TRUE(cftest::wait_running(p));
        return p;
    }
    static std::string v_of(const changefeed::Change& c) { return std::string(c.current.at("v").as_string()); }
};

using Providers = ::testing::Types<PostgresProvider, MemoryProvider>;
class ProviderNames {
public:
    template <class T>
    static std::string GetName(int) {
        return std::is_same_v<T, PostgresProvider> ? "Postgres" : "InMemory";
    }
};
TYPED_TEST_SUITE(SharedSemantics, Providers, ProviderNames);

TYPED_TEST(SharedSemantics, OnlyWritesAfterTheFirstStart) {
    this->provider.insert(1, "before");
    cftest::Recorder rec;
    auto p = this->start("p", rec);
    this->provider.insert(2, "after");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2"); }));
    EXPECT_FALSE(rec.has("1"));
    EXPECT_FALSE(rec.empty_batch_seen());
}

TYPED_TEST(SharedSemantics, CheckpointsCatchUpAndNamesAreIndependent) {
    cftest::Recorder rec;
    auto p = this->start("p", rec);
    this->provider.insert(1, "a");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    p.stop();
    this->provider.insert(2, "b");
    this->provider.update(1, "a2");
    p.start();  // same name: resumes from its checkpoint
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2") && rec.of("1").size() == 2; }));
    EXPECT_EQ(this->v_of(rec.of("1").back()), "a2");
    EXPECT_EQ(rec.of("2").size(), 1u);
    cftest::Recorder other;
    auto q = this->start("other", other);  // a new name starts at the end
    this->provider.insert(3, "c");
    ASSERT_TRUE(cftest::eventually([&] { return other.has("3") && rec.has("3"); }));
    EXPECT_EQ(other.size(), 1u);
}

TYPED_TEST(SharedSemantics, LatestVersionCollapsesAndHidesDeletes) {
    cftest::Recorder rec;
    auto p = this->start("p", rec);
    p.stop();
    this->provider.insert(1, "v1");
    this->provider.update(1, "v2");
    this->provider.update(1, "v3");
    this->provider.insert(2, "gone");
    this->provider.remove(2);
    this->provider.insert(3, "kept");
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("3"); }));
    ASSERT_EQ(rec.of("1").size(), 1u);  // once, carrying the last write
    EXPECT_EQ(this->v_of(rec.of("1")[0]), "v3");
    EXPECT_FALSE(rec.has("2"));  // created and deleted between reads: not at all
}

TYPED_TEST(SharedSemantics, AllVersionsCarriesEveryWriteWithPreviousImages) {
    cftest::Recorder rec;
    auto p = this->start("audit", rec, FeedMode::all_versions_and_deletes);
    this->provider.insert(1, "a");
    this->provider.update(1, "b");
    this->provider.remove(1);
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 3; }));
    auto c = rec.of("1");
    EXPECT_EQ(c[0].operation, Operation::create);
    EXPECT_FALSE(c[0].has_previous());
    EXPECT_EQ(c[1].operation, Operation::replace);
    EXPECT_EQ(std::string(c[1].previous.at("v").as_string()), "a");
    EXPECT_EQ(this->v_of(c[1]), "b");
    EXPECT_EQ(c[2].operation, Operation::delete_);
    EXPECT_FALSE(c[2].has_current());
    for (const auto& ch : c) {  // a write's time, as the server or the in-memory store saw it
        ASSERT_TRUE(ch.written_at.has_value());
        EXPECT_LT(std::chrono::abs(*ch.written_at - std::chrono::system_clock::now()), std::chrono::minutes(1));
    }
    EXPECT_EQ(std::string(c[2].previous.at("v").as_string()), "b");
    EXPECT_LT(c[0].seq, c[1].seq);
    EXPECT_LT(c[1].seq, c[2].seq);
}

TYPED_TEST(SharedSemantics, AThrowingHandlerGetsTheBatchAgain) {
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    std::atomic<int> calls{0};
    auto o = cftest::fast_options("one");
    o.on_error = errors.sink();
    auto p = this->provider.processor(
        "p",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx, std::stop_token) {
            if (calls++ == 0) throw std::runtime_error("first time fails");
            rec.add(batch, ctx);
        },
        o, FeedMode::latest_version);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    this->provider.insert(1, "a");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    EXPECT_EQ(errors.messages(changefeed::errc::handler_failed).size(), 1u);
}

TYPED_TEST(SharedSemantics, StartFromBeginningDeliversExistingDocuments) {
    cftest::Recorder warmup;
    { auto p = this->start("warmup", warmup); }  // the in-memory log records from here
    this->provider.insert(1, "a");
    this->provider.insert(2, "b");
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_from_beginning = true;
    auto p = this->start("fresh", rec, FeedMode::latest_version, o);
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1") && rec.has("2"); }));
    EXPECT_TRUE(rec.of("1")[0].from_backfill);
    this->provider.insert(3, "c");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("3"); }));
    EXPECT_FALSE(rec.of("3")[0].from_backfill);
    // Refused on the all-versions feed at compile time: its options have no such field.
    EXPECT_FALSE(cftest::has_start_from_beginning<changefeed::AllVersionsOptions>);
    EXPECT_FALSE((std::is_convertible_v<changefeed::LatestVersionOptions, changefeed::AllVersionsOptions>));
}

TYPED_TEST(SharedSemantics, OrderPerDocumentHolds) {
    cftest::Recorder rec;
    auto o = cftest::fast_options("one");
    o.max_batch_size = 5;
    auto p = this->start("audit", rec, FeedMode::all_versions_and_deletes, o);
    for (int id = 1; id <= 12; ++id) this->provider.insert(id, "0");
    for (int round = 1; round <= 4; ++round)
        for (int id = 1; id <= 12; ++id) this->provider.update(id, std::to_string(round));
    ASSERT_TRUE(cftest::eventually([&] { return rec.size() == 60; }));
    for (int id = 1; id <= 12; ++id) {
        auto c = rec.of(std::to_string(id));
        ASSERT_EQ(c.size(), 5u);
        for (int k = 0; k < 5; ++k) EXPECT_EQ(this->v_of(c[k]), std::to_string(k));
        for (const auto& ch : c) EXPECT_EQ(ch.range_id, c[0].range_id);  // one document, one range
    }
    for (const auto& h : rec.all()) EXPECT_EQ(h.change.range_id, h.context.range_id);
}

TYPED_TEST(SharedSemantics, ProcessorErrorsAreTheSame) {
    cftest::Recorder rec;
    try {
        this->provider.processor("", rec.handler(), cftest::fast_options("one"), FeedMode::latest_version);
        FAIL();
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), changefeed::errc::processor_name_empty);
    }
    auto p = this->start("p", rec);
    try {
        p.start();
        FAIL();
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), changefeed::errc::already_started);
    }
    p.stop();
    EXPECT_EQ(p.state(), changefeed::State::stopped);
}

// What only the in-memory provider promises.
TEST(InMemory, RangeIsThePartitionKeyValue) {
    changefeed::InMemoryCollection orders({.key = {"id"}, .partition_key = {"region", "city"}});
    cftest::Recorder rec;
    auto p = changefeed::make_all_versions_processor(orders, "p", rec.handler(), cftest::fast_options("one"));
    p.start();
    orders.create({{"id", "o1"}, {"region", "eu"}, {"city", "Oslo"}});
    orders.create({{"id", "o2"}, {"region", "us"}, {"city", "Austin"}});
    ASSERT_TRUE(cftest::eventually([&] { return rec.size() == 2; }));
    auto all = rec.all();
    EXPECT_EQ(all[0].context.range, "eu/Oslo");
    EXPECT_EQ(all[0].change.partition_key, "eu/Oslo");
    EXPECT_EQ(all[1].context.range, "us/Austin");
    EXPECT_NE(all[0].context.range_id, all[1].context.range_id);
    EXPECT_EQ(all[0].change.doc_id, "o1");
}

TEST(InMemory, TwoInstancesOfOneNameEachSeeEverything) {
    changefeed::InMemoryCollection c;
    cftest::Recorder a, b;
    auto p = changefeed::make_latest_version_processor(c, "p", a.handler(), cftest::fast_options("a"));
    auto q = changefeed::make_latest_version_processor(c, "p", b.handler(), cftest::fast_options("b"));
    p.start();
    q.start();
    for (int id = 1; id <= 5; ++id) c.create({{"id", id}});
    ASSERT_TRUE(cftest::eventually([&] { return a.counts().size() == 5 && b.counts().size() == 5; }));
}

TEST(InMemory, CompositeKeysAndWriteErrors) {
    changefeed::InMemoryCollection c({.key = {"tenant", "id"}});
    EXPECT_EQ(c.id_of({{"tenant", "t1"}, {"id", 7}}), "[\"t1\",\"7\"]");
    c.create({{"tenant", "t1"}, {"id", 7}});
    EXPECT_THROW(c.create({{"tenant", "t1"}, {"id", 7}}), changefeed::Error);
    EXPECT_THROW(c.replace({{"tenant", "t1"}, {"id", 8}}), changefeed::Error);
    EXPECT_THROW(c.create({{"id", 9}}), changefeed::Error);
    EXPECT_TRUE(c.delete_("[\"t1\",\"7\"]"));
    EXPECT_FALSE(c.delete_("[\"t1\",\"7\"]"));
}

}  // namespace
