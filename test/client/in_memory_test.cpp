// What only the in-memory provider does, or does in its own way: its
// transaction, its positions and event ids, its history checks for start
// options, and the consumer policy (recovery, duplicate alerts, lease
// callbacks) without a server.  Needs no cluster.
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>

using namespace std::chrono_literals;
using changefeed::errc;

namespace {

changefeed::Projector applying() {
    return [](const changefeed::Change&, const changefeed::Context&) { return changefeed::ProjectionResult::applied; };
}

TEST(InMemoryTransaction, ReadsItsOwnWritesAndCommitsThemWithTheBatch) {
    changefeed::InMemoryCollection c;
    std::mutex mu;
    std::vector<std::string> log;  // what the handler's reads saw
    std::atomic<int> calls{0};
    std::error_code sql;
    auto handler = [&](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                       const changefeed::Context&) {
        auto& m = tx.memory();
        EXPECT_EQ(&m, &tx.memory());
        sql = cftest::code_of([&] { tx.sql(); });
        for (const auto& ch : batch) {
            auto before = m.get("names", ch.doc_id);
            m.put("names", ch.doc_id, ch.current.at("name"));
            auto after = m.get("names", ch.doc_id);
            std::lock_guard lock(mu);
            log.push_back((before ? std::string(before->as_string()) : "-") + ">" + std::string(after->as_string()));
        }
        if (calls++ == 0) {
            EXPECT_TRUE(m.erase("names", "1"));   // its own put
            EXPECT_FALSE(m.erase("names", "1"));  // gone for this transaction
            EXPECT_FALSE(m.get("names", "1"));
            throw std::runtime_error("first attempt fails");
        }
    };
    cftest::ErrorLog errors;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor(c, "names", handler, o);
    p.start();
    c.create({{"id", 1}, {"name", "Ann"}});
    ASSERT_TRUE(cftest::eventually([&] { return c.projection("names").size() == 1; }));
    EXPECT_EQ(c.projection("names").at("1"), boost::json::value("Ann"));
    c.replace({{"id", 1}, {"name", "Bo"}});
    ASSERT_TRUE(cftest::eventually([&] { return c.projection("names").at("1") == boost::json::value("Bo"); }));
    std::lock_guard lock(mu);
    // The failed attempt's writes were not seen by the retry; the committed value was seen by the next batch.
    EXPECT_EQ(log, (std::vector<std::string>{"->Ann", "->Ann", "Ann>Bo"}));
    EXPECT_EQ(sql, errc::invalid_option);
    EXPECT_EQ(errors.messages(errc::handler_failed).size(), 1u);
    EXPECT_TRUE(c.projection("other").empty());
}

TEST(InMemory, EventIdsAndPositionsNameTheSequence) {
    changefeed::InMemoryCollection c;
    cftest::Recorder warmup;
    {
        auto w = changefeed::make_processor(c, "warmup", warmup.handler(), cftest::fast_options("w"));
        w.start();
    }
    c.create({{"id", "a"}});
    c.create({{"id", "b"}});
    std::atomic<int> calls{0};
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_from_beginning = true;
    o.on_error = errors.sink();
    auto p = changefeed::make_processor(
        c, "p",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            if (calls++ == 0) throw std::runtime_error("once");
            rec.add(batch, ctx);
        },
        o);
    p.start();
    c.create({{"id", "c"}});
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("a") && rec.has("b") && rec.has("c"); }));
    EXPECT_EQ(rec.of("a")[0].event_id, "mem.b1.a");  // the first backfill of this collection
    EXPECT_EQ(rec.of("b")[0].event_id, "mem.b1.b");
    EXPECT_EQ(rec.of("c")[0].event_id, "mem.3");
    EXPECT_EQ(rec.of("c")[0].txid, 3u);
    for (const auto& h : rec.all()) EXPECT_EQ(h.context.position, h.change.from_backfill ? "" : "mem.3");
}

TEST(InMemory, StartOptionsNeverStartSilentlyFromNow) {
    changefeed::InMemoryCollection c;
    c.create({{"id", 0}});  // seq 1, before any processor: not recorded
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_time = std::chrono::system_clock::now() - 1min;
    // Nothing was recorded before this first processor.  As a start_time from
    // before enable() on PostgreSQL, it starts at the first recorded change:
    // nothing recorded was dropped (the write before is not in the feed).
    cftest::Recorder early;
    auto p = changefeed::make_processor(c, "p", early.handler(), o);
    p.start();
    c.create({{"id", 1}});  // seq 2
    c.create({{"id", 2}});  // seq 3
    ASSERT_TRUE(cftest::eventually([&] { return early.has("1") && early.has("2"); }));
    EXPECT_FALSE(early.has("0"));
    p.stop();
    cftest::Recorder since;
    auto q = changefeed::make_processor(c, "since", since.handler(), o);
    q.start();  // a fresh name: everything recorded since the minute before
    ASSERT_TRUE(cftest::eventually([&] { return since.has("1") && since.has("2"); }));
    EXPECT_FALSE(since.has("0"));
    q.stop();
    o.start_time.reset();
    o.start_position = "mem.0";
    EXPECT_EQ(cftest::code_of([&] {
                  q = changefeed::make_processor(c, "q", rec.handler(), o);
                  q.start();
              }),
              errc::history_lost);
    o.start_position = "mem.99";
    EXPECT_EQ(cftest::code_of([&] {
                  q = changefeed::make_processor(c, "q", rec.handler(), o);
                  q.start();
              }),
              errc::foreign_position);
    for (const char* bad :
         {"mem.", "mem.1.2", "mem.x", "mem.-1", "mem.5.3.4", "pg.1", "mem.1.", "mem.99999999999999999999"}) {
        o.start_position = bad;
        EXPECT_EQ(cftest::code_of([&] {
                      q = changefeed::make_processor(c, "q", rec.handler(), o);
                      q.start();
                  }),
                  errc::malformed_position)
            << bad;
    }
    // Read by the others long ago, still there for a new name: every write since the recording is kept.
    o.start_position = "mem.2";
    q = changefeed::make_processor(c, "q", rec.handler(), o);
    q.start();
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2"); }));
    EXPECT_EQ(rec.of("2").size(), 1u);
    EXPECT_FALSE(rec.has("1"));  // at or before the position
    EXPECT_FALSE(rec.has("0"));
}

// Manual checkpoints of backfill pages store the backfill's progress; a
// checkpoint function stays callable after its processor is gone.
TEST(InMemory, ManualCheckpointsOfABackfill) {
    changefeed::InMemoryCollection c;
    cftest::Recorder warmup;
    {
        auto w = changefeed::make_processor(c, "warmup", warmup.handler(),
                                            changefeed::LatestVersionOptions(cftest::fast_options("w")));
        w.start();
    }
    for (const char* k : {"a", "b", "c"}) c.upsert({{"id", "x"}, {"k", k}});  // one document, replaced
    c.create({{"id", "y"}});
    c.create({{"id", "z"}});
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.checkpoint_mode = changefeed::CheckpointMode::manual;
    o.start_from_beginning = true;
    o.max_batch_size = 1;
    std::mutex mu;
    std::vector<std::string> seen;
    std::vector<std::function<void()>> checkpoints;
    auto handler = [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
        std::lock_guard lock(mu);
        for (const auto& ch : batch) seen.push_back(ch.doc_id);
        checkpoints.push_back(ctx.checkpoint);
        if (seen.size() == 1) ctx.checkpoint();  // only the first page: "x"
    };
    {
        auto p = changefeed::make_processor(c, "p", handler, o);
        p.start();
        ASSERT_TRUE(cftest::eventually([&] {
            std::lock_guard lock(mu);
            return seen.size() == 3;
        }));
    }
    std::function<void()> second;
    {
        std::lock_guard lock(mu);
        EXPECT_EQ(seen, (std::vector<std::string>{"x", "y", "z"}));
        second = checkpoints.at(1);
        checkpoints.at(0)();  // again, later: already stored, nothing changes
        seen.clear();
    }
    auto p = changefeed::make_processor(c, "p", handler, o);
    p.start();
    ASSERT_TRUE(cftest::eventually([&] {
        std::lock_guard lock(mu);
        return seen.size() == 2;
    }));
    p.stop();
    {
        std::lock_guard lock(mu);
        EXPECT_EQ(seen, (std::vector<std::string>{"y", "z"}));  // after the checkpointed page
        seen.clear();
    }
    second();  // "y" checkpointed after its processor was destroyed
    p.start();
    ASSERT_TRUE(cftest::eventually([&] {
        std::lock_guard lock(mu);
        return !seen.empty();
    }));
    // A change of the log, written now, comes once the backfill is over:
    // whatever else it would deliver came first.
    c.create({{"id", "marker"}});
    ASSERT_TRUE(cftest::eventually([&] {
        std::lock_guard lock(mu);
        return std::find(seen.begin(), seen.end(), "marker") != seen.end();
    }));
    std::lock_guard lock(mu);
    EXPECT_EQ(seen.back(), "marker");
    seen.pop_back();
    EXPECT_EQ(seen, (std::vector<std::string>{"z"}));
}

TEST(InMemory, ShapesAndOptionsAreChecked) {
    changefeed::InMemoryCollection c;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.checkpoint_mode = changefeed::CheckpointMode::manual;
    auto tx_handler = [](const std::vector<changefeed::Change>&, changefeed::Transaction&, const changefeed::Context&) {
    };
    EXPECT_EQ(cftest::code_of([&] { changefeed::make_processor(c, "p", tx_handler, o); }), errc::invalid_option);
    EXPECT_EQ(cftest::code_of([&] { changefeed::make_processor(c, "p", applying(), o); }), errc::invalid_option);
    EXPECT_EQ(cftest::code_of([&] {
                  changefeed::make_processor(c, "p", changefeed::Projector{}, changefeed::LatestVersionOptions{});
              }),
              errc::invalid_option);
    o = cftest::fast_options("one");
    o.start_from_beginning = true;
    o.start_time = std::chrono::system_clock::now();
    EXPECT_EQ(cftest::code_of([&] { changefeed::make_processor(c, "p", applying(), o); }), errc::invalid_option);
    o = cftest::fast_options("one");
    o.duplicate_alert_share = 1.5;
    EXPECT_EQ(cftest::code_of([&] { changefeed::make_processor(c, "p", applying(), o); }), errc::invalid_option);
    o.duplicate_alert_share = 0.5;
    o.duplicate_alert_window = 0;
    EXPECT_EQ(cftest::code_of([&] { changefeed::make_processor(c, "p", applying(), o); }), errc::invalid_option);
}

// handler_failing goes to the policy with the count of failures in a row; a
// halt stops that range (the others go on), names the runbook, then tells halted.
TEST(InMemory, RecoveryPolicyHaltsAFailingRange) {
    changefeed::InMemoryCollection c({.key = {"id"}, .partition_key = {"region"}});
    std::mutex mu;
    std::vector<changefeed::Incident> incidents;
    std::vector<changefeed::State> states;
    cftest::ErrorLog errors;
    std::atomic<int> eu_calls{0};
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.retry_delay = 10ms;
    o.on_error = errors.sink();
    o.on_state_change = [&](changefeed::State s) {
        std::lock_guard lock(mu);
        states.push_back(s);
    };
    o.recovery = [&](const changefeed::Incident& i) {
        std::lock_guard lock(mu);
        incidents.push_back(i);
        if (i.situation == changefeed::Situation::handler_failing && i.consecutive_failures >= 3)
            return changefeed::RecoveryDecision::halt(changefeed::State::stopped, "handler-failing");
        return changefeed::default_recovery(i);
    };
    auto p = changefeed::make_processor(
        c, "p",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            if (ctx.range == "eu") {
                ++eu_calls;
                throw std::runtime_error("eu is broken");
            }
            rec.add(batch, ctx);
        },
        o);
    p.start();
    c.create({{"id", 1}, {"region", "eu"}});
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(errc::halted); }));
    c.create({{"id", 2}, {"region", "us"}});
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2"); }));  // the other range goes on
    // A change for each range, the halted one first: once the other range's
    // arrived, a round of the ranges passed the halted one with work waiting.
    c.create({{"id", 3}, {"region", "eu"}});
    c.create({{"id", 4}, {"region", "us"}});
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("4"); }));
    EXPECT_EQ(eu_calls, 3);  // no delivery of the halted range after the halt
    EXPECT_EQ(p.state(), changefeed::State::stopped);
    {
        std::lock_guard lock(mu);
        ASSERT_EQ(incidents.size(), 3u);
        for (int k = 0; k < 3; ++k) {
            EXPECT_EQ(incidents[k].situation, changefeed::Situation::handler_failing);
            EXPECT_EQ(incidents[k].consecutive_failures, k + 1);
            EXPECT_EQ(incidents[k].range_id, 0);
            EXPECT_EQ(incidents[k].code, errc::handler_failed);
        }
        EXPECT_EQ(states.back(), changefeed::State::stopped);
    }
    auto all = errors.all();
    ASSERT_EQ(all.size(), 4u);
    for (int k = 0; k < 2; ++k) EXPECT_TRUE(all[k].runbook.empty());
    EXPECT_EQ(all[2].code, errc::handler_failed);
    EXPECT_EQ(all[2].runbook, "docs/runbooks/handler-failing.md");
    EXPECT_EQ(all[3].code, errc::halted);
    EXPECT_EQ(all[3].runbook, "docs/runbooks/handler-failing.md");
    EXPECT_EQ(all[3].range_id, 0);
    // A restart delivers the range again (the halt kept its checkpoint).
    p.stop();
    std::atomic<bool> got{false};
    auto q = changefeed::make_processor(
        c, "p",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
            for (const auto& ch : batch) got = got || ch.doc_id == "1";
        },
        changefeed::LatestVersionOptions(cftest::fast_options("one")));
    q.start();
    EXPECT_TRUE(cftest::eventually([&] { return got.load(); }));
}

// duplicates_rising once per crossing of the share over the window.
TEST(InMemory, DuplicatesRisingIsToldOncePerCrossing) {
    changefeed::InMemoryCollection c;
    std::atomic<bool> duplicates{false};
    std::atomic<int> seen{0};
    cftest::ErrorLog errors;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.on_error = errors.sink();
    o.duplicate_alert_window = 4;
    o.duplicate_alert_share = 0.5;
    auto p = changefeed::make_processor(
        c, "p",
        [&](const changefeed::Change&, const changefeed::Context&) {
            ++seen;
            return duplicates ? changefeed::ProjectionResult::skipped_duplicate : changefeed::ProjectionResult::applied;
        },
        o);
    p.start();
    int id = 0;
    auto write = [&](int n) {
        for (int k = 0; k < n; ++k) c.create({{"id", ++id}});
        ASSERT_TRUE(cftest::eventually([&] { return seen == id; }));
    };
    write(4);  // 0 of 4
    duplicates = true;
    write(2);  // 2 of 4: not more than half
    EXPECT_FALSE(errors.has(errc::duplicates_rising));
    write(1);  // 3 of 4
    EXPECT_EQ(errors.messages(errc::duplicates_rising).size(), 1u);
    write(4);  // still above: not told again
    EXPECT_EQ(errors.messages(errc::duplicates_rising).size(), 1u);
    duplicates = false;
    write(2);  // 2 of 4: fell below
    duplicates = true;
    write(2);  // 2 of 4
    EXPECT_EQ(errors.messages(errc::duplicates_rising).size(), 1u);
    write(1);  // 3 of 4: a new crossing
    EXPECT_EQ(errors.messages(errc::duplicates_rising).size(), 2u);
    EXPECT_EQ(p.projection_stats().applied, 6);
    EXPECT_EQ(p.projection_stats().skipped_duplicate, 10);
}

TEST(InMemory, LeaseCallbacksOncePerRangeAndOnStop) {
    changefeed::InMemoryCollection c;
    std::mutex mu;
    std::vector<int> acquired, released;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.on_lease_acquired = [&](int r) {
        std::lock_guard lock(mu);
        acquired.push_back(r);
    };
    o.on_lease_released = [&](int r) {
        std::lock_guard lock(mu);
        released.push_back(r);
    };
    c.create({{"id", 1}});  // a range known before the start
    cftest::Recorder rec;
    auto p = changefeed::make_processor(c, "p", rec.handler(), o);
    p.start();
    c.create({{"id", 2}});
    c.replace({{"id", 2}});
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2"); }));
    {
        std::lock_guard lock(mu);
        EXPECT_EQ(acquired, (std::vector<int>{0, 1}));
        EXPECT_TRUE(released.empty());
    }
    p.stop();
    std::lock_guard lock(mu);
    EXPECT_EQ(released, (std::vector<int>{0, 1}));
}

TEST(InMemoryHistory, AsOfNeedsTheLogFromThePositionOn) {
    // The log begins at the first processor's start by default: before it,
    // only the position of now can be rebuilt.
    changefeed::InMemoryCollection c;
    c.create({{"id", 1}, {"v", "a"}});
    const auto early = c.current_position();
    EXPECT_EQ(changefeed::as_of(c, early).size(), 1u);
    c.replace({{"id", 1}, {"v", "b"}});
    EXPECT_EQ(cftest::code_of([&] { changefeed::as_of(c, early); }), errc::history_lost);
    EXPECT_EQ(cftest::code_of([&] { changefeed::as_of(c, "mem.99"); }), errc::position_ahead);

    // record_from_start: as a table's log from enable() on.
    changefeed::InMemoryOptions o;
    o.record_from_start = true;
    changefeed::InMemoryCollection d(o);
    d.create({{"id", 1}, {"v", "a"}});
    const auto p = d.current_position();
    d.replace({{"id", 1}, {"v", "b"}});
    d.create({{"id", 2}, {"v", "c"}});
    const auto docs = changefeed::as_of(d, p);
    ASSERT_EQ(docs.size(), 1u);
    EXPECT_EQ(docs[0].document.at("v").as_string(), "a");
    EXPECT_EQ(docs[0].document_json, R"({"id":1,"v":"a"})");
    // A clear after the position carries no documents: nothing to undo with.
    d.clear();
    EXPECT_EQ(cftest::code_of([&] { changefeed::as_of(d, p); }), errc::cannot_rebuild);
    EXPECT_EQ(cftest::code_of([&] { changefeed::diff(d, p, d.current_position()); }), errc::cannot_rebuild);
    EXPECT_TRUE(changefeed::as_of(d, d.current_position()).empty());

    // Without previous images a replace cannot be undone; a create can.
    changefeed::InMemoryOptions np;
    np.record_from_start = true;
    np.keep_previous = false;
    changefeed::InMemoryCollection e(np);
    e.create({{"id", 1}, {"v", "a"}});
    const auto q = e.current_position();
    e.create({{"id", 2}, {"v", "b"}});
    EXPECT_EQ(changefeed::as_of(e, q).size(), 1u);
    e.replace({{"id", 1}, {"v", "c"}});
    EXPECT_EQ(cftest::code_of([&] { changefeed::as_of(e, q); }), errc::cannot_rebuild);
}

}  // namespace
