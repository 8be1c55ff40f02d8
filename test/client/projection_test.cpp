// Event identity and the projector: a change keeps its event id on every
// redelivery and for every processor; a projector is not called again for
// what its deduplication store recorded, counts what it applied and skipped,
// and tells duplicates_rising once per crossing.  The processors run as a
// role that is only a member of changefeed_processor.
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <atomic>
#include <mutex>
#include <regex>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("projection", CF_TEST_PORT, true);

namespace {

const char* const kRole = "projection_svc";

void ensure_role() {
    static std::once_flag once;
    std::call_once(once, [] { cftest::create_login_role(cluster(), kRole, {"changefeed_processor"}); });
}

changefeed::Collection table_for_role(const std::string& table, int ranges) {
    ensure_role();
    cftest::create_table(cluster(), table, ranges);
    cluster().exec("GRANT SELECT ON " + table + " TO " + kRole);
    return changefeed::Collection(cluster().conninfo_as(kRole), table);
}

int collection_id(const std::string& table) {
    return cluster()
        .exec("SELECT id FROM changefeed.collections WHERE table_name = '" + table + "'::regclass")[0][0]
        .as<int>();
}

// The marker changes (support/markers.hpp) a projector was given, kept
// apart from what the tests count: a stray or repeated call for a change
// would have come before the marker of its range.
class Markers {
public:
    // Whether `c` is a marker (then noted).
    bool take(const changefeed::Change& c) {
        if (!cftest::is_marker(c)) return false;
        std::lock_guard lock(mu_);
        seen_.insert(c.doc_id);
        return true;
    }
    // Writes a marker into every range of `table` and waits until each was projected;
    // how many there were (0: not all came).
    std::int64_t deliver(const std::string& table) {
        return static_cast<std::int64_t>(
            cftest::deliver_markers(cluster(), table, 100000, [this](const std::string& id) {
                std::lock_guard lock(mu_);
                return seen_.count(id) > 0;
            }).size());
    }

private:
    std::mutex mu_;
    std::set<std::string> seen_;
};

std::int64_t applied_rows(const std::string& processor) {
    return cluster()
        .exec("SELECT count(*) FROM changefeed.applied WHERE processor = '" + processor + "'")[0][0]
        .as<std::int64_t>();
}

TEST(EventIds, TheSameAcrossARedeliveryAndAcrossProcessors) {
    auto coll = table_for_role("ev_ids", 4);
    const int cid = collection_id("ev_ids");
    std::mutex mu;
    std::vector<std::string> failed_batch;                 // processor a, first attempt
    std::map<std::string, std::vector<std::string>> seen;  // processor -> ids delivered and checkpointed
    std::atomic<bool> failed{false};
    auto handler_of = [&](const std::string& who) {
        return [&, who](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
            std::lock_guard lock(mu);
            if (who == "a" && !failed.exchange(true)) {
                for (const auto& c : batch) failed_batch.push_back(c.event_id);
                throw std::runtime_error("first attempt fails");
            }
            for (const auto& c : batch) {
                EXPECT_EQ(c.event_id, std::to_string(cid) + "." + std::to_string(c.txid) + "." + std::to_string(c.seq));
                seen[who].push_back(c.event_id);
            }
        };
    };
    // All versions: the insert and the update of a row are two changes, however they are read.
    auto a = changefeed::make_processor(coll, "ev_a", changefeed::Handler(handler_of("a")),
                                        changefeed::AllVersionsOptions(cftest::fast_options("a")));
    auto b = changefeed::make_processor(coll, "ev_b", changefeed::Handler(handler_of("b")),
                                        changefeed::AllVersionsOptions(cftest::fast_options("b")));
    a.start();
    b.start();
    ASSERT_TRUE(cftest::wait_running(a, 4u));
    ASSERT_TRUE(cftest::wait_running(b, 4u));
    cluster().exec("INSERT INTO ev_ids (id, v) SELECT g, 'x' FROM generate_series(1, 30) g");
    cluster().exec("UPDATE ev_ids SET v = 'y' WHERE id <= 10");
    ASSERT_TRUE(cftest::eventually([&] {
        std::lock_guard lock(mu);
        return seen["a"].size() == 40 && seen["b"].size() == 40;
    }));
    std::lock_guard lock(mu);
    std::set<std::string> ids_a(seen["a"].begin(), seen["a"].end()), ids_b(seen["b"].begin(), seen["b"].end());
    EXPECT_EQ(ids_a.size(), 40u);  // distinct: an update is a change of its own
    EXPECT_EQ(ids_a, ids_b);
    ASSERT_FALSE(failed_batch.empty());
    for (const auto& id : failed_batch) EXPECT_TRUE(ids_a.count(id)) << id << " changed on redelivery";
}

TEST(EventIds, BackfillRowsNameTheirBackfill) {
    auto coll = table_for_role("ev_backfill", 2);
    cluster().exec("INSERT INTO ev_backfill (id, v) SELECT g, 'x' FROM generate_series(1, 20) g");
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_from_beginning = true;
    auto p = changefeed::make_processor(coll, "ev_bf", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 20; }));
    const std::regex shape(std::to_string(collection_id("ev_backfill")) + R"(\.b[0-9a-f]{16}\.(\d+))");
    std::set<std::string> prefixes;
    for (const auto& h : rec.all()) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(h.change.event_id, m, shape)) << h.change.event_id;
        EXPECT_EQ(m[1].str(), h.change.doc_id);
        prefixes.insert(h.change.event_id.substr(0, h.change.event_id.size() - h.change.doc_id.size()));
    }
    EXPECT_EQ(prefixes.size(), 1u);  // one backfill, one name, whatever the range
}

TEST(Projector, NotCalledAgainForTheChangesBeforeTheOneThatThrew) {
    auto coll = table_for_role("pj_throw", 1);
    std::mutex mu;
    std::map<std::string, int> calls;  // event id -> projector calls
    std::vector<std::string> order;
    std::atomic<int> total{0};
    cftest::ErrorLog errors;
    Markers markers;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.max_batch_size = 10;
    o.on_error = errors.sink();
    auto p = changefeed::make_processor(
        coll, "pj", changefeed::Projector([&](const changefeed::Change& c, const changefeed::Context&) {
            if (markers.take(c)) return changefeed::ProjectionResult::applied;
            std::lock_guard lock(mu);
            if (++calls[c.event_id] == 1) order.push_back(c.event_id);
            if (++total == 4) throw std::runtime_error("the 4th change fails once");
            return changefeed::ProjectionResult::applied;
        }),
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1u));
    cluster().exec("INSERT INTO pj_throw (id, v) SELECT g, 'x' FROM generate_series(1, 10) g");  // one batch
    ASSERT_TRUE(cftest::eventually([&] { return p.projection_stats().applied == 10; }));
    const auto marked = markers.deliver("pj_throw");
    ASSERT_GT(marked, 0);
    {
        std::lock_guard lock(mu);
        ASSERT_EQ(order.size(), 10u);
        for (std::size_t i = 0; i < order.size(); ++i) EXPECT_EQ(calls[order[i]], i == 3 ? 2 : 1) << "change " << i + 1;
        EXPECT_EQ(total.load(), 11);
    }
    EXPECT_TRUE(errors.has(changefeed::errc::handler_failed));
    const auto stats = p.projection_stats();
    EXPECT_EQ(stats.applied, 10 + marked);
    EXPECT_EQ(stats.skipped_duplicate, 3);  // the three before the throw, found in the store on the retry
    EXPECT_EQ(applied_rows("pj"), 10 + marked);
    p.stop();
    EXPECT_EQ(cftest::sqlstate_as(cluster(), kRole, "SELECT changefeed.drop_processor('pj_throw', 'pj')"), "");
    EXPECT_EQ(applied_rows("pj"), 0);
}

// A connection blip while the process lives: every backend of the processor
// (the worker's, which reads the batch and records what was applied, the
// lease keeper's, the listener's) is terminated while the projector is in the
// middle of a batch, twice.  The record of what it applied fails with the
// connection; it is made on the next connection before the batch is read
// again, and the re-read skips those changes: each is projected once.
TEST(Projector, AppliesEachChangeOnceAcrossTerminatedBackends) {
    const std::string role = "projection_blip_svc";
    cftest::create_login_role(cluster(), role, {"changefeed_processor"});
    cftest::create_table(cluster(), "pj_blip", 1);
    cluster().exec("GRANT SELECT ON pj_blip TO " + role);
    changefeed::Collection coll(cluster().conninfo_as(role), "pj_blip");
    std::mutex mu;
    std::map<std::string, int> calls;  // event id -> projector calls
    std::atomic<int> total{0};
    Markers markers;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.max_batch_size = 20;
    auto p = changefeed::make_processor(
        coll, "pj_blip", changefeed::Projector([&](const changefeed::Change& c, const changefeed::Context&) {
            if (markers.take(c)) return changefeed::ProjectionResult::applied;
            {
                std::lock_guard lock(mu);
                ++calls[c.event_id];
            }
            ++total;
            std::this_thread::sleep_for(100ms);
            return changefeed::ProjectionResult::applied;
        }),
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1u));
    auto terminate_all = [&] {
        return cluster()
            .exec("SELECT count(pg_catalog.pg_terminate_backend(pid)) FROM pg_catalog.pg_stat_activity"
                  " WHERE usename = '" +
                  role + "'")[0][0]
            .as<int>();
    };
    int terminated = 0;
    for (int round = 0; round < 2; ++round) {
        const int before = total;
        const int from = round * 20 + 1;
        cluster().exec("INSERT INTO pj_blip (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(from) + ", " +
                       std::to_string(from + 19) + ") g");                     // one transaction, one batch
        ASSERT_TRUE(cftest::eventually([&] { return total >= before + 5; }));  // mid-batch
        terminated += terminate_all();
        // The batch is read again after the blip: its checkpoint comes after
        // the re-read, so a re-application would have happened by then.
        ASSERT_TRUE(cftest::eventually(
            [&] {
                return cluster()
                               .exec("SELECT count(*) FROM changefeed.applied WHERE processor = 'pj_blip'")[0][0]
                               .as<int>() == (round + 1) * 20 &&
                       cluster()
                               .exec("SELECT coalesce(sum(pending), 0) FROM changefeed.lag('pj_blip', 'pj_blip')")[0][0]
                               .as<std::int64_t>() == 0;
            },
            60s));
    }
    EXPECT_GE(terminated, 2);  // at least the worker's backend, each time
    const auto marked = markers.deliver("pj_blip");
    ASSERT_GT(marked, 0);
    std::lock_guard lock(mu);
    EXPECT_EQ(calls.size(), 40u);
    for (const auto& [id, n] : calls) EXPECT_EQ(n, 1) << id;
    EXPECT_EQ(total.load(), 40);
    EXPECT_EQ(p.projection_stats().applied, 40 + marked);
}

// A lease that moves while its owner is in the middle of a batch: a second
// instance joins and takes half the ranges at once (balancing steals from a
// live instance).  The owner's batch runs fenced, so the taker waits for its
// record and checkpoint and skips what it applied: each change projected once.
TEST(Projector, ALeaseTakenMidBatchReappliesNothing) {
    auto coll = table_for_role("pj_steal", 4);
    std::mutex mu;
    std::map<std::string, int> calls;  // event id -> projector calls
    std::atomic<int> total{0};
    Markers markers;
    auto projector = changefeed::Projector([&](const changefeed::Change& c, const changefeed::Context&) {
        if (markers.take(c)) return changefeed::ProjectionResult::applied;
        {
            std::lock_guard lock(mu);
            ++calls[c.event_id];
        }
        ++total;
        std::this_thread::sleep_for(20ms);
        return changefeed::ProjectionResult::applied;
    });
    auto options = [](const std::string& instance) {
        changefeed::LatestVersionOptions o = cftest::fast_options(instance);
        o.max_batch_size = 50;
        return o;
    };
    auto a = changefeed::make_processor(coll, "pj_steal", projector, options("a"));
    a.start();
    ASSERT_TRUE(cftest::wait_running(a, 4u));
    cluster().exec("INSERT INTO pj_steal (id, v) SELECT g, 'x' FROM generate_series(1, 400) g");
    ASSERT_TRUE(cftest::eventually([&] { return total >= 10; }));  // a is mid-batch
    auto b = changefeed::make_processor(coll, "pj_steal", projector, options("b"));
    b.start();
    ASSERT_TRUE(cftest::wait_running(b, 2u));
    ASSERT_TRUE(cftest::eventually(
        [&] {
            return cluster()
                           .exec("SELECT count(*) FROM changefeed.applied WHERE processor = 'pj_steal'")[0][0]
                           .as<int>() == 400 &&
                   cluster()
                           .exec("SELECT coalesce(sum(pending), 0) FROM changefeed.lag('pj_steal', 'pj_steal')")[0][0]
                           .as<std::int64_t>() == 0;
        },
        60s));
    ASSERT_GT(markers.deliver("pj_steal"), 0);
    std::lock_guard lock(mu);
    EXPECT_EQ(calls.size(), 400u);
    for (const auto& [id, n] : calls) EXPECT_EQ(n, 1) << id;
    EXPECT_EQ(total.load(), 400);
    EXPECT_GT(b.projection_stats().applied, 0);  // b did take ranges with work left
}

// A backfill's pages go through the same fenced transaction, the scan's
// progress as its checkpoint: every row projected once, the backfill done.
TEST(Projector, ProjectsABackfillOnce) {
    auto coll = table_for_role("pj_backfill", 2);
    cluster().exec("INSERT INTO pj_backfill (id, v) SELECT g, 'x' FROM generate_series(1, 45) g");
    std::mutex mu;
    std::map<std::string, int> calls;
    Markers markers;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.start_from_beginning = true;
    o.max_batch_size = 10;
    auto p = changefeed::make_processor(
        coll, "pj_bf", changefeed::Projector([&](const changefeed::Change& c, const changefeed::Context&) {
            if (markers.take(c)) return changefeed::ProjectionResult::applied;
            std::lock_guard lock(mu);
            ++calls[c.doc_id];
            return changefeed::ProjectionResult::applied;
        }),
        o);
    p.start();
    ASSERT_TRUE(cftest::eventually([&] {
        return cluster()
            .exec("SELECT bool_and(backfill_done) FROM changefeed.leases WHERE processor = 'pj_bf'")[0][0]
            .as<bool>(false);
    }));
    cluster().exec("INSERT INTO pj_backfill (id, v) VALUES (46, 'after')");
    ASSERT_TRUE(cftest::eventually([&] { return p.projection_stats().applied == 46; }));
    const auto marked = markers.deliver("pj_backfill");
    ASSERT_GT(marked, 0);
    std::lock_guard lock(mu);
    EXPECT_EQ(calls.size(), 46u);
    for (const auto& [id, n] : calls) EXPECT_EQ(n, 1) << id;
    EXPECT_EQ(applied_rows("pj_bf"), 46 + marked);
}

TEST(Projector, DuplicatesRisingIsToldOncePerCrossing) {
    auto coll = table_for_role("pj_dups", 1);
    std::atomic<bool> skip{true};
    cftest::ErrorLog errors;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.duplicate_alert_window = 4;
    o.duplicate_alert_share = 0.5;
    o.on_error = errors.sink();
    auto p = changefeed::make_processor(
        coll, "pj_dups", changefeed::Projector([&](const changefeed::Change&, const changefeed::Context&) {
            return skip ? changefeed::ProjectionResult::skipped_duplicate : changefeed::ProjectionResult::applied;
        }),
        o);
    EXPECT_EQ(p.projection_stats().applied + p.projection_stats().skipped_duplicate, 0);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1u));
    auto write = [&](int from) {
        cluster().exec("INSERT INTO pj_dups (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(from) + ", " +
                       std::to_string(from + 9) + ") g");
    };
    // Counted, and recorded: a batch's alerts are told before its record commits.
    auto handled = [&](std::int64_t n) {
        return cftest::eventually([&] {
            auto s = p.projection_stats();
            return s.applied + s.skipped_duplicate == n && applied_rows("pj_dups") == n;
        });
    };
    write(1);
    ASSERT_TRUE(handled(10));
    EXPECT_EQ(errors.messages(changefeed::errc::duplicates_rising).size(), 1u);  // crossed once, stayed above
    skip = false;
    write(11);
    ASSERT_TRUE(handled(20));
    EXPECT_EQ(errors.messages(changefeed::errc::duplicates_rising).size(), 1u);  // fell below: re-armed
    skip = true;
    write(21);
    ASSERT_TRUE(handled(30));
    EXPECT_EQ(errors.messages(changefeed::errc::duplicates_rising).size(), 2u);
    EXPECT_EQ(p.projection_stats().applied, 10);
    EXPECT_EQ(p.projection_stats().skipped_duplicate, 20);
    EXPECT_EQ(applied_rows("pj_dups"), 30);  // what the projector skipped itself is recorded too
}

TEST(Projector, OptionsAreChecked) {
    changefeed::Collection coll(cluster().conninfo(), "whatever");
    auto projector = changefeed::Projector([](const changefeed::Change&, const changefeed::Context&) {
        return changefeed::ProjectionResult::applied;
    });
    auto transactional = changefeed::TransactionalHandler([](const std::vector<changefeed::Change>&,
                                                             changefeed::Transaction&, const changefeed::Context&) {});
    auto invalid = [&](auto handler, auto tweak) {
        changefeed::LatestVersionOptions o = cftest::fast_options("one");
        tweak(o);
        return cftest::code_of([&] { auto p = changefeed::make_processor(coll, "opts", handler, o); }) ==
               make_error_code(changefeed::errc::invalid_option);
    };
    using O = changefeed::LatestVersionOptions;
    EXPECT_TRUE(invalid(projector, [](O& o) { o.duplicate_alert_share = 0; }));
    EXPECT_TRUE(invalid(projector, [](O& o) { o.duplicate_alert_share = 1.5; }));
    EXPECT_TRUE(invalid(projector, [](O& o) { o.duplicate_alert_window = 0; }));
    EXPECT_TRUE(invalid(projector, [](O& o) { o.checkpoint_mode = changefeed::CheckpointMode::manual; }));
    EXPECT_TRUE(invalid(transactional, [](O& o) { o.checkpoint_mode = changefeed::CheckpointMode::manual; }));
    EXPECT_TRUE(invalid(changefeed::Projector(), [](O&) {}));
    EXPECT_FALSE(invalid(projector, [](O& o) { o.duplicate_alert_share = 1.0; }));
    EXPECT_FALSE(invalid(cftest::noop_handler(), [](O& o) { o.checkpoint_mode = changefeed::CheckpointMode::manual; }));
}

}  // namespace
