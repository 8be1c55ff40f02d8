// The semantics both providers share, proved by running one suite against
// PostgreSQL and against the in-memory provider (typed tests).
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

using namespace std::chrono_literals;
using changefeed::Operation;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("shared", CF_TEST_PORT, true);

namespace {

// Which feed a test reads (chosen in the library by the options' type).
enum class FeedMode { latest_version, all_versions_and_deletes };

// Documents are {"id": int, "v": text} on both sides.  A transactional
// handler's projection is key -> text: a table of the test's own on
// PostgreSQL, a named in-memory projection on the other side.
class PostgresProvider {
public:
    PostgresProvider() : table_("shared_" + std::to_string(++counter_)) {
        cluster().exec("CREATE TABLE " + table_ +
                       " (id int PRIMARY KEY, v text);"
                       "SELECT changefeed.enable('" +
                       table_ +
                       "', ranges => 4);"
                       "CREATE TABLE " +
                       table_ + "_projection (key text PRIMARY KEY, value text NOT NULL)");
    }
    void insert(int id, const std::string& v) {
        exec("INSERT INTO " + table_ + " VALUES (" + std::to_string(id) + ", " + quoted(v) + ")");
    }
    void update(int id, const std::string& v) {
        exec("UPDATE " + table_ + " SET v = " + quoted(v) + " WHERE id = " + std::to_string(id));
    }
    void remove(int id) { exec("DELETE FROM " + table_ + " WHERE id = " + std::to_string(id)); }
    // Handler, Projector or TransactionalHandler: the constructor's overload picks the shape.
    template <class Consumer>
    changefeed::Processor processor(const std::string& name, Consumer h, changefeed::LatestVersionOptions o,
                                    FeedMode mode) {
        changefeed::Collection c(cluster().conninfo(), table_);
        if (mode == FeedMode::latest_version) return changefeed::make_processor(c, name, std::move(h), std::move(o));
        return changefeed::make_processor(c, name, std::move(h), cftest::common_options(std::move(o)));
    }
    // A transactional handler's write to the projection, in its transaction.
    void put(changefeed::Transaction& tx, const std::string& key, const std::string& value) {
        tx.sql().exec_params("INSERT INTO " + table_ +
                                 "_projection (key, value) VALUES ($1, $2) "
                                 "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                             key, value);
    }
    // What has committed of the projection.
    std::map<std::string, std::string> projection() {
        std::map<std::string, std::string> out;
        pqxx::work tx(conn());
        for (const auto& row : tx.exec("SELECT key, value FROM " + table_ + "_projection"))
            out[row[0].as<std::string>()] = row[1].as<std::string>();
        tx.commit();
        return out;
    }
    // The accessor of the other provider's transaction (it must refuse).
    static void use_foreign_transaction(changefeed::Transaction& tx) { tx.memory(); }
    // The position after every write so far, as a writer takes it.
    std::string position() {
        pqxx::work tx(conn());
        auto pos = tx.exec("SELECT changefeed.current_position()")[0][0].as<std::string>();
        tx.commit();
        return pos;
    }
    changefeed::Collection collection() const { return changefeed::Collection(cluster().conninfo(), table_); }

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
    template <class Consumer>
    changefeed::Processor processor(const std::string& name, Consumer h, changefeed::LatestVersionOptions o,
                                    FeedMode mode) {
        if (mode == FeedMode::latest_version)
            return changefeed::make_processor(coll_, name, std::move(h), std::move(o));
        return changefeed::make_processor(coll_, name, std::move(h), cftest::common_options(std::move(o)));
    }
    void put(changefeed::Transaction& tx, const std::string& key, const std::string& value) {
        tx.memory().put("projection", key, boost::json::value(value));
    }
    std::map<std::string, std::string> projection() {
        std::map<std::string, std::string> out;
        for (const auto& [key, value] : coll_.projection("projection")) out[key] = std::string(value.as_string());
        return out;
    }
    static void use_foreign_transaction(changefeed::Transaction& tx) { tx.sql(); }
    std::string position() { return coll_.current_position(); }
    const changefeed::InMemoryCollection& collection() const { return coll_; }

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

// Waits until this machine's clock (the server's too: the cluster runs here)
// is past `t` by more than a tick of the providers' timestamps (microseconds),
// and returns the time then: a change written after that is written after `t`.
std::chrono::system_clock::time_point clock_past(std::chrono::system_clock::time_point t) {
    for (;;) {
        const auto now = std::chrono::system_clock::now();
        if (now > t + 1ms) return now;
        std::this_thread::yield();
    }
}
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
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
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
    // A write after the start comes from the log -- and may come from the
    // backfill too, when its range was still being scanned (at least once).
    EXPECT_TRUE(cftest::eventually([&] {
        for (const auto& c : rec.of("3"))
            if (!c.from_backfill) return true;
        return false;
    }));
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

// A projector is not given again what it applied: after it threw on the
// third change of a batch, the redelivery (here by a restarted processor)
// skips the two changes recorded before the throw.
TYPED_TEST(SharedSemantics, ProjectorSkipsWhatItAppliedBeforeARedelivery) {
    std::mutex mu;
    std::map<std::string, int> calls;             // per event id
    std::map<std::string, std::string> value_of;  // event id -> v
    int total = 0;
    auto projector = [&](const changefeed::Change& c, const changefeed::Context&) {
        std::lock_guard lock(mu);
        ++calls[c.event_id];
        value_of[c.event_id] = this->v_of(c);
        if (++total == 3) throw std::runtime_error("the projector fails on the third change");
        return changefeed::ProjectionResult::applied;
    };
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("one");
    o.on_error = errors.sink();
    o.retry_delay = std::chrono::hours(1);  // no retry: the next instance gets the batch again
    auto first = this->provider.processor("totals", projector, o, FeedMode::all_versions_and_deletes);
    first.start();
    ASSERT_TRUE(cftest::wait_running(first));
    first.stop();  // the writes come while it is stopped, so that they are read as one batch
    this->provider.insert(1, "0");
    for (int k = 1; k <= 4; ++k) this->provider.update(1, std::to_string(k));
    first.start();
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(changefeed::errc::handler_failed); }));
    first.stop();
    EXPECT_EQ(first.projection_stats().applied, 2);
    EXPECT_EQ(first.projection_stats().skipped_duplicate, 0);

    o.retry_delay = 100ms;
    auto second = this->provider.processor("totals", projector, o, FeedMode::all_versions_and_deletes);
    second.start();
    ASSERT_TRUE(cftest::eventually([&] { return second.projection_stats().applied == 3; }));
    EXPECT_EQ(second.projection_stats().skipped_duplicate, 2);  // "0" and "1", from the store
    std::lock_guard lock(mu);
    EXPECT_EQ(total, 6);
    ASSERT_EQ(calls.size(), 5u);  // one event id per change, the same on the redelivery
    for (const auto& [id, n] : calls) {
        EXPECT_FALSE(id.empty());
        EXPECT_EQ(n, value_of[id] == "2" ? 2 : 1) << "event " << id << " (v " << value_of[id] << ")";
    }
}

TYPED_TEST(SharedSemantics, ProjectionStatsCountAppliedAndSkipped) {
    auto projector = [](const changefeed::Change& c, const changefeed::Context&) {
        // The projector's own check, e.g. a version compare, may find a change applied.
        return std::stoi(c.doc_id) % 2 ? changefeed::ProjectionResult::applied
                                       : changefeed::ProjectionResult::skipped_duplicate;
    };
    auto p = this->provider.processor("stats", projector, cftest::fast_options("one"), FeedMode::latest_version);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    for (int id = 1; id <= 5; ++id) this->provider.insert(id, "x");
    ASSERT_TRUE(cftest::eventually([&] {
        auto s = p.projection_stats();
        return s.applied + s.skipped_duplicate == 5;
    }));
    EXPECT_EQ(p.projection_stats().applied, 3);
    EXPECT_EQ(p.projection_stats().skipped_duplicate, 2);
    cftest::Recorder rec;
    auto plain = this->start("plain", rec);
    this->provider.insert(6, "x");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("6"); }));
    EXPECT_EQ(plain.projection_stats().applied, 0);  // not a projector
    EXPECT_EQ(plain.projection_stats().skipped_duplicate, 0);
}

// The projection's writes and the checkpoint commit together: a handler that
// throws after writing leaves the projection unchanged and gets the batch
// again; once it returned, a restarted processor does not get it again.
TYPED_TEST(SharedSemantics, TransactionalHandlerCommitsProjectionAndCheckpointTogether) {
    std::atomic<bool> fail{true};
    std::atomic<int> failures{0};
    std::mutex mu;
    std::vector<std::string> delivered;
    std::error_code foreign;
    auto handler = [&](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                       const changefeed::Context&) {
        for (const auto& c : batch) this->provider.put(tx, c.doc_id, this->v_of(c));
        {
            std::lock_guard lock(mu);
            for (const auto& c : batch) delivered.push_back(c.doc_id);
            foreign = cftest::code_of([&] { TypeParam::use_foreign_transaction(tx); });
        }
        if (fail) {
            ++failures;
            throw std::runtime_error("fails after writing");
        }
    };
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("one");
    o.on_error = errors.sink();
    auto p = this->provider.processor("copy", handler, o, FeedMode::latest_version);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    this->provider.insert(1, "a");
    ASSERT_TRUE(cftest::eventually([&] { return failures >= 2; }));
    EXPECT_TRUE(this->provider.projection().empty());  // nothing of the failed attempts
    fail = false;
    const std::map<std::string, std::string> one{{"1", "a"}};
    ASSERT_TRUE(cftest::eventually([&] { return this->provider.projection() == one; }));
    p.stop();
    {
        std::lock_guard lock(mu);
        EXPECT_GE(delivered.size(), 3u);  // the batch again after each failure
        for (const auto& id : delivered) EXPECT_EQ(id, "1");
        EXPECT_EQ(foreign, changefeed::errc::invalid_option);
        delivered.clear();
    }
    this->provider.insert(2, "b");
    auto q = this->provider.processor("copy", handler, o, FeedMode::latest_version);
    q.start();
    const std::map<std::string, std::string> two{{"1", "a"}, {"2", "b"}};
    ASSERT_TRUE(cftest::eventually([&] { return this->provider.projection() == two; }));
    std::lock_guard lock(mu);
    EXPECT_EQ(delivered, std::vector<std::string>{"2"});  // the committed batch is not delivered again
}

// Read-your-writes: after wait_for(the writer's position) the projection
// holds the write, every time, however slow the handler; a stopped processor
// times out naming what is behind; wait_until_caught_up covers what came before it.
TYPED_TEST(SharedSemantics, WaitForReturnsOnceTheWriteIsProjected) {
    auto handler = [&](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                       const changefeed::Context&) {
        std::this_thread::sleep_for(5ms);  // a handler slower than the writer
        for (const auto& c : batch) this->provider.put(tx, c.doc_id, this->v_of(c));
    };
    auto p = this->provider.processor("ryw", handler, cftest::fast_options("one"), FeedMode::all_versions_and_deletes);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    for (int i = 1; i <= 15; ++i) {
        this->provider.insert(i, "v" + std::to_string(i));
        p.wait_for(this->provider.position(), 30s);
        const auto projected = this->provider.projection();
        const auto it = projected.find(std::to_string(i));
        ASSERT_NE(it, projected.end()) << "write " << i << " not projected after wait_for";
        EXPECT_EQ(it->second, "v" + std::to_string(i));
    }
    p.stop();
    this->provider.update(3, "while stopped");
    const std::string behind = this->provider.position();
    try {
        p.wait_for(behind, 50ms);
        FAIL() << "wait_for returned with a change unhandled";
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), changefeed::errc::wait_timed_out) << e.what();
    }
    EXPECT_EQ(cftest::code_of([&] { p.wait_for("mem.x", 50ms); }), changefeed::errc::malformed_position);
    p.start();
    p.wait_until_caught_up(30s);
    EXPECT_EQ(this->provider.projection().at("3"), "while stopped");
    p.wait_for(behind, 0ms);  // covered: returns at once
}

TYPED_TEST(SharedSemantics, StartTimeStartsAtTheFirstChangeWrittenAtOrAfterIt) {
    cftest::Recorder warmup;
    { auto p = this->start("warmup", warmup); }  // the in-memory log records from here
    this->provider.insert(1, "before");
    // Written before t, and 2 and 3 after it, by the clock rather than a pause.
    const auto t = clock_past(std::chrono::system_clock::now());
    clock_past(t);
    this->provider.insert(2, "after");
    this->provider.insert(3, "after");
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_time = t;
    auto p = this->start("since", rec, FeedMode::latest_version, o);
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2") && rec.has("3"); }));
    EXPECT_FALSE(rec.has("1"));
    for (const auto& h : rec.all()) EXPECT_GE(*h.change.written_at, t);
    p.stop();  // a checkpoint wins over start_time
    this->provider.insert(4, "later");
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("4"); }));
    EXPECT_EQ(rec.of("2").size(), 1u);
    EXPECT_EQ(rec.of("3").size(), 1u);
    o.start_position = "mem.1";  // two start options at once
    EXPECT_EQ(cftest::code_of([&] {
                  auto q = this->provider.processor("both", rec.handler(), o, FeedMode::latest_version);
                  q.start();
              }),
              changefeed::errc::invalid_option);
}

// A start_time from before the feed began (before enable() on PostgreSQL,
// before the recording in memory) is no loss: nothing the feed held was
// dropped, so a fresh name starts at the feed's first change.
TYPED_TEST(SharedSemantics, StartTimeBeforeTheFeedBeganStartsAtItsFirstChange) {
    cftest::Recorder warmup;
    { auto p = this->start("warmup", warmup); }  // the in-memory log records from here
    this->provider.insert(1, "first");
    this->provider.insert(2, "second");
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_time = std::chrono::system_clock::now() - 24h;
    auto p = this->start("early", rec, FeedMode::all_versions_and_deletes, o);
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1") && rec.has("2"); }));
    EXPECT_EQ(p.state(), changefeed::State::running);
    EXPECT_EQ(rec.count("1"), 1);
}

TYPED_TEST(SharedSemantics, StartPositionFromAContextPosition) {
    cftest::Recorder a;
    auto p = this->start("a", a);
    this->provider.insert(1, "x");
    ASSERT_TRUE(cftest::eventually([&] { return a.has("1"); }));
    std::string position;
    for (const auto& h : a.all())
        if (h.change.doc_id == "1") position = h.context.position;
    ASSERT_FALSE(position.empty());
    this->provider.insert(2, "y");
    cftest::Recorder b;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_position = position;
    auto q = this->start("b", b, FeedMode::latest_version, o);
    ASSERT_TRUE(cftest::eventually([&] { return b.has("2"); }));
    EXPECT_FALSE(b.has("1"));
    o.start_position = "not a position";
    EXPECT_EQ(cftest::code_of([&] {
                  auto r = this->provider.processor("c", b.handler(), o, FeedMode::latest_version);
                  r.start();
              }),
              changefeed::errc::malformed_position);
}

// CheckpointMode::manual: only Context::checkpoint stores, from the handler
// or later from another thread; an older position is ignored.  A restart
// resumes after the last checkpoint and redelivers the rest.
TYPED_TEST(SharedSemantics, ManualCheckpointsStoreOnlyWhatTheHandlerCheckpointed) {
    std::mutex mu;
    std::vector<std::string> seen, positions;
    std::function<void()> checkpoint_of_a;
    auto handler = [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
        std::lock_guard lock(mu);
        positions.push_back(ctx.position);
        bool has_b = false;
        for (const auto& c : batch) {
            seen.push_back(this->v_of(c));
            if (this->v_of(c) == "a") checkpoint_of_a = ctx.checkpoint;
            has_b = has_b || this->v_of(c) == "b";
        }
        if (has_b) ctx.checkpoint();
    };
    auto has = [&](const std::string& v) {
        std::lock_guard lock(mu);
        return std::find(seen.begin(), seen.end(), v) != seen.end();
    };
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.checkpoint_mode = changefeed::CheckpointMode::manual;
    auto p = this->provider.processor("manual", handler, o, FeedMode::all_versions_and_deletes);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    this->provider.insert(1, "a");
    ASSERT_TRUE(cftest::eventually([&] { return has("a"); }));
    this->provider.update(1, "b");
    ASSERT_TRUE(cftest::eventually([&] { return has("b"); }));
    std::function<void()> older;
    {
        std::lock_guard lock(mu);
        older = checkpoint_of_a;
    }
    ASSERT_TRUE(older);
    std::thread([&] { older(); }).join();  // from another thread, after b's: ignored
    this->provider.update(1, "c");
    ASSERT_TRUE(cftest::eventually([&] { return has("c"); }));
    p.stop();
    {
        std::lock_guard lock(mu);
        for (const auto& pos : positions) EXPECT_FALSE(pos.empty());
        seen.clear();
    }
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return has("c"); }));
    {
        std::lock_guard lock(mu);
        EXPECT_EQ(seen, std::vector<std::string>{"c"});  // after b's checkpoint; c was never checkpointed
    }
    // Manual checkpoints are for a Handler only.
    auto projector = [](const changefeed::Change&, const changefeed::Context&) {
        return changefeed::ProjectionResult::applied;
    };
    EXPECT_EQ(cftest::code_of([&] {
                  auto q = this->provider.processor("manual-projector", projector, o, FeedMode::latest_version);
                  q.start();
              }),
              changefeed::errc::invalid_option);
}

// What only the in-memory provider promises.
TEST(InMemory, RangeIsThePartitionKeyValue) {
    changefeed::InMemoryCollection orders({.key = {"id"}, .partition_key = {"region", "city"}});
    cftest::Recorder rec;
    auto p = changefeed::make_processor(orders, "p", rec.handler(),
                                        changefeed::AllVersionsOptions(cftest::fast_options("one")));
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
    auto p = changefeed::make_processor(c, "p", a.handler(), cftest::fast_options("a"));
    auto q = changefeed::make_processor(c, "p", b.handler(), cftest::fast_options("b"));
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

// id -> v of the documents at `position`.
template <class P>
std::map<std::string, std::string> values_as_of(const P& provider, const std::string& position) {
    std::map<std::string, std::string> out;
    for (const auto& d : changefeed::as_of(provider.collection(), position))
        out[d.doc_id] = std::string(d.document.at("v").as_string());
    return out;
}

// "id operation previous>current (n changes)" per document, in id order.
template <class P>
std::vector<std::string> net_of(const P& provider, const std::string& since, const std::string& upto) {
    std::vector<std::string> out;
    for (const auto& n : changefeed::diff(provider.collection(), since, upto)) {
        auto v = [](const boost::json::value& doc) {
            return doc.is_null() ? std::string("-") : std::string(doc.at("v").as_string());
        };
        out.push_back(n.doc_id + " " + changefeed::to_string(n.operation) + " " + v(n.previous) + ">" + v(n.current) +
                      " (" + std::to_string(n.event_ids.size()) + ")");
    }
    std::sort(out.begin(), out.end());
    return out;
}

TYPED_TEST(SharedSemantics, AsOfAndDiffUndoTheChangesAfterAPosition) {
    cftest::Recorder warmup;
    { auto p = this->start("warmup", warmup); }  // the in-memory log records from here
    this->provider.insert(1, "a");
    this->provider.insert(2, "b");
    const auto p0 = this->provider.position();
    this->provider.update(1, "a2");
    this->provider.remove(2);
    this->provider.insert(3, "c");
    const auto p1 = this->provider.position();
    this->provider.update(3, "c2");
    this->provider.update(1, "a");  // back to its image at p0
    const auto p2 = this->provider.position();

    using Values = std::map<std::string, std::string>;
    EXPECT_EQ(values_as_of(this->provider, p0), (Values{{"1", "a"}, {"2", "b"}}));
    EXPECT_EQ(values_as_of(this->provider, p1), (Values{{"1", "a2"}, {"3", "c"}}));
    EXPECT_EQ(values_as_of(this->provider, p2), (Values{{"1", "a"}, {"3", "c2"}}));
    using Lines = std::vector<std::string>;
    EXPECT_EQ(net_of(this->provider, p0, p1), (Lines{"1 replace a>a2 (1)", "2 delete b>- (1)", "3 create ->c (1)"}));
    // Document 1 changed and changed back: no net change.
    EXPECT_EQ(net_of(this->provider, p0, p2), (Lines{"2 delete b>- (1)", "3 create ->c2 (2)"}));
    EXPECT_EQ(net_of(this->provider, p2, p2), Lines{});
    EXPECT_EQ(cftest::code_of([&] { changefeed::diff(this->provider.collection(), p1, p0); }),
              changefeed::errc::invalid_option);
    EXPECT_EQ(cftest::code_of([&] { changefeed::as_of(this->provider.collection(), "mem.x"); }),
              changefeed::errc::malformed_position);
}

// Another process (here: no Processor object at all) waits for the stored
// checkpoints of a processor that runs elsewhere.
TYPED_TEST(SharedSemantics, TheFreeWaitForWaitsForTheStoredCheckpoints) {
    auto& provider = this->provider;
    cftest::Recorder rec;
    // A handler slower than the writer.
    auto p = provider.processor("elsewhere", rec.handler(20ms), cftest::fast_options("one"),
                                FeedMode::all_versions_and_deletes);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    for (int i = 1; i <= 5; ++i) {
        provider.insert(i, "v");
        changefeed::wait_for(provider.collection(), "elsewhere", provider.position(), 30s);
        EXPECT_TRUE(rec.has(std::to_string(i))) << "write " << i << " not handled after wait_for";
    }
    p.stop();
    provider.insert(6, "while stopped");
    EXPECT_EQ(cftest::code_of([&] {
                  changefeed::wait_for(provider.collection(), "elsewhere", provider.position(), 50ms);
              }),
              changefeed::errc::wait_timed_out);
    EXPECT_EQ(cftest::code_of([&] {
                  changefeed::wait_for(provider.collection(), "never-ran", provider.position(), 50ms);
              }),
              changefeed::errc::processor_not_found);
    EXPECT_EQ(cftest::code_of([&] { changefeed::wait_for(provider.collection(), "", provider.position(), 50ms); }),
              changefeed::errc::processor_name_empty);
}
