// History lost (retention dropped what a stopped processor had not read):
// the range halts in history_lost with the runbook and delivers nothing more,
// or, with `resync`, is re-read from the table.  And the lag estimator.
// Retention is shrunk to a day and maintain() run as if ten days had passed,
// which drops today's log partition: this suite has its own cluster.
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#include <chrono>
#include <thread>

using namespace std::chrono_literals;
using changefeed::errc;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("historylost", CF_TEST_PORT, true);

namespace {

changefeed::Collection coll(const std::string& table) { return {cluster().conninfo(), table}; }

// Drops everything retention would drop ten days from now, then makes the log
// writable again for the rest of the suite.
void drop_history(const std::string& table) {
    cluster().exec("SELECT changefeed.alter('" + table + "', retention => '1 day')");
    cluster().exec("SELECT changefeed.maintain(now() + interval '10 days')");
    cluster().exec("DELETE FROM changefeed.log_default; SELECT changefeed.create_partitions()");
}

TEST(HistoryLost, HaltsWithTheRunbookAndDeliversNothingMore) {
    cftest::create_table(cluster(), "hl_halt", 2);
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("one");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor(coll("hl_halt"), "audit", rec.handler(), changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    cluster().exec("INSERT INTO hl_halt (id, v) VALUES (1, 'read')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1"); }));
    p.stop();
    // Written while the consumer is stopped, then dropped by retention.
    cluster().exec("INSERT INTO hl_halt (id, v) SELECT g, 'lost' FROM generate_series(2, 20) g");
    drop_history("hl_halt");

    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::history_lost; }));
    // Both ranges lose their history; each halts and is reported once.
    ASSERT_TRUE(cftest::eventually([&] { return errors.messages(errc::history_lost).size() >= 2; }));
    for (const auto& m : errors.messages(errc::history_lost)) {
        EXPECT_NE(m.find("docs/runbooks/history-lost.md"), std::string::npos) << m;
        EXPECT_NE(m.find("What was lost"), std::string::npos) << m;
        EXPECT_NE(m.find("hl_halt"), std::string::npos) << m;
        EXPECT_NE(m.find("will not restart from now"), std::string::npos) << m;
        // Steps a processor's own role can take: functions, not the catalog tables.
        EXPECT_NE(m.find("SELECT changefeed.reset_checkpoint('hl_halt', 'audit');"), std::string::npos) << m;
        EXPECT_EQ(m.find("DELETE FROM"), std::string::npos) << m;
    }
    for (const auto& e : errors.all())
        if (e.code == errc::history_lost) EXPECT_TRUE(e.range_id.has_value());

    // Never a silent restart from now: a later write is not delivered either.
    cluster().exec("INSERT INTO hl_halt (id, v) VALUES (100, 'after')");
    // A witness handles markers after it: wake-ups and reads p had too.
    ASSERT_TRUE(cftest::witness_rounds(cluster(), "hl_halt", 101));
    EXPECT_EQ(rec.size(), 1u);
    EXPECT_EQ(p.state(), changefeed::State::history_lost);
    EXPECT_EQ(errors.messages(errc::history_lost).size(), 2u);  // reported once per range, not per poll

    // The lag estimator says so too.
    auto lag = changefeed::estimate_lag(coll("hl_halt"), "audit");
    ASSERT_EQ(lag.size(), 2u);
    for (const auto& r : lag) {
        EXPECT_TRUE(r.history_lost);
        EXPECT_FALSE(r.pending.has_value());
        EXPECT_DOUBLE_EQ(r.retention_used, 1.0);
    }
    p.stop();
    EXPECT_EQ(p.state(), changefeed::State::history_lost);

    // Following the runbook: the checkpoints move to now and the processor runs again.
    cluster().exec("SELECT changefeed.reset_checkpoint('hl_halt', 'audit')");
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    cluster().exec("INSERT INTO hl_halt (id, v) VALUES (200, 'after reset')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("200"); }));
    EXPECT_FALSE(rec.has("100"));  // skipped deliberately by the reset
    p.stop();
}

// A checkpoint the database never issued (as after a restore into another
// database) is a lost history too: the range halts with a runbook that says
// why, instead of reading from nothing or from now.
TEST(HistoryLost, ACheckpointFromAnotherDatabaseHaltsWithTheRunbook) {
    cftest::create_table(cluster(), "hl_foreign", 2);
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("one");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor(coll("hl_foreign"), "audit", rec.handler(), changefeed::AllVersionsOptions(o));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    p.stop();

    std::string foreign;
    {
        pqxx::connection admin(cluster().conninfo());
        pqxx::nontransaction(admin).exec("CREATE DATABASE hl_other");
        pqxx::connection other(cluster().conninfo() + " dbname=hl_other");
        pqxx::work tx(other);
        tx.exec("CREATE EXTENSION changefeed");
        foreign = tx.exec1("SELECT changefeed.current_position()")[0].as<std::string>();
        tx.commit();
    }
    cluster().exec("UPDATE changefeed.lease SET checkpoint = " + pqxx::connection(cluster().conninfo()).quote(foreign) +
                   " WHERE processor = 'audit'"
                   "   AND collection_id = (changefeed.collection_of('hl_foreign')).id");
    cluster().exec("INSERT INTO hl_foreign (id, v) VALUES (1, 'after restore')");

    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::history_lost; }));
    ASSERT_TRUE(cftest::eventually([&] { return errors.messages(errc::history_lost).size() >= 2; }));
    for (const auto& m : errors.messages(errc::history_lost)) {
        EXPECT_NE(m.find("another database or cluster"), std::string::npos) << m;
        // Not to now: the changes after it may still be in the log; from a time instead.
        EXPECT_EQ(m.find("SELECT changefeed.reset_checkpoint('hl_foreign', 'audit');"), std::string::npos) << m;
        EXPECT_NE(m.find("SELECT changefeed.reset_checkpoint('hl_foreign', 'audit', \"position\" => "
                         "changefeed.position_at('hl_foreign', '<time of the last change it handled>'));"),
                  std::string::npos)
            << m;
    }
    EXPECT_EQ(rec.size(), 0u);
    p.stop();
    cluster().exec("SELECT changefeed.reset_checkpoint('hl_foreign', 'audit')");
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    cluster().exec("INSERT INTO hl_foreign (id, v) VALUES (2, 'after reset')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("2"); }));
    p.stop();
}

TEST(HistoryLost, ResyncRereadsTheTableThenContinues) {
    cftest::create_table(cluster(), "hl_resync", 2);
    cftest::Recorder rec;
    cftest::ErrorLog errors;
    changefeed::LatestVersionOptions o = cftest::fast_options("one");
    o.on_error = errors.sink();
    o.resync = true;
    auto p = changefeed::make_processor(coll("hl_resync"), "view", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    cluster().exec("INSERT INTO hl_resync (id, v) VALUES (1, 'one'), (2, 'two')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("1") && rec.has("2"); }));
    p.stop();
    cluster().exec("UPDATE hl_resync SET v = 'changed' WHERE id = 1");
    cluster().exec("INSERT INTO hl_resync (id, v) VALUES (3, 'three')");
    cluster().exec("DELETE FROM hl_resync WHERE id = 2");
    drop_history("hl_resync");

    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return rec.of("1").size() == 2 && rec.has("3"); }));
    EXPECT_TRUE(rec.of("1").back().from_backfill);
    EXPECT_EQ(rec.of("1").back().current.at("v").as_string(), "changed");
    EXPECT_TRUE(rec.of("3")[0].from_backfill);
    EXPECT_EQ(rec.of("2").size(), 1u);  // deleted: the table no longer has it
    EXPECT_FALSE(errors.messages(errc::history_lost).empty());
    EXPECT_NE(errors.messages(errc::history_lost)[0].find("resync"), std::string::npos);

    // Then the log again, and the processor kept running.
    cluster().exec("INSERT INTO hl_resync (id, v) VALUES (4, 'four')");
    ASSERT_TRUE(cftest::eventually([&] { return rec.has("4"); }));
    EXPECT_FALSE(rec.of("4")[0].from_backfill);
    EXPECT_EQ(p.state(), changefeed::State::running);
    // A resynced range is not lost any more.
    for (const auto& r : changefeed::estimate_lag(coll("hl_resync"), "view")) EXPECT_FALSE(r.history_lost);
}

// Refused at compile time: the all-versions feed's options have no resync.
static_assert(cftest::has_resync<changefeed::LatestVersionOptions>);
static_assert(!cftest::has_resync<changefeed::AllVersionsOptions>);

TEST(HistoryLost, ResyncIsRefusedOnTheAllVersionsFeed) {
    EXPECT_TRUE(cftest::has_resync<changefeed::LatestVersionOptions>);
    EXPECT_FALSE(cftest::has_resync<changefeed::AllVersionsOptions>);
    EXPECT_FALSE((std::is_convertible_v<changefeed::LatestVersionOptions, changefeed::AllVersionsOptions>));
}

TEST(Lag, EstimatorReturnsWhatTheServerSays) {
    cftest::create_table(cluster(), "lag_t", 4);
    cftest::Recorder rec;
    auto p = changefeed::make_processor(coll("lag_t"), "dash", rec.handler(), cftest::fast_options("pod-1"));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    auto live = changefeed::estimate_lag(coll("lag_t"), "dash");
    ASSERT_EQ(live.size(), 4u);
    for (const auto& r : live) {
        EXPECT_EQ(r.owner.value_or(""), "pod-1");
        EXPECT_TRUE(r.live);
        EXPECT_EQ(r.pending.value_or(-1), 0);
        EXPECT_TRUE(r.pending_exact);
    }
    p.stop();
    // v: the writing transaction's start in microseconds, which oldest_pending must equal.
    cluster().exec("INSERT INTO lag_t (id, v)"
                   "  SELECT g, (extract(epoch FROM now()) * 1000000)::bigint::text FROM generate_series(1, 30) g");
    auto written_us = std::stoll(cluster().exec("SELECT v FROM lag_t LIMIT 1")[0][0].as<std::string>());
    auto lag = changefeed::estimate_lag(coll("lag_t"), "dash");
    auto sql = cluster().exec("SELECT range_id, owner, pending, pending_exact, history_lost"
                              "  FROM changefeed.lag('lag_t', 'dash') ORDER BY range_id");
    ASSERT_EQ(lag.size(), sql.size());
    std::int64_t total = 0;
    for (std::size_t i = 0; i < lag.size(); ++i) {
        EXPECT_EQ(lag[i].range_id, sql[i][0].as<int>());
        EXPECT_EQ(lag[i].owner.has_value(), !sql[i][1].is_null());
        EXPECT_FALSE(lag[i].live);  // released on stop
        ASSERT_TRUE(lag[i].pending.has_value());
        EXPECT_EQ(*lag[i].pending, sql[i][2].as<std::int64_t>());
        EXPECT_TRUE(lag[i].pending_exact);
        EXPECT_FALSE(lag[i].history_lost);
        EXPECT_GE(lag[i].retention_used, 0.0);
        EXPECT_LT(lag[i].retention_used, 1.0);
        if (*lag[i].pending > 0) {
            ASSERT_TRUE(lag[i].oldest_pending.has_value());
            EXPECT_EQ(std::chrono::duration_cast<std::chrono::microseconds>(lag[i].oldest_pending->time_since_epoch())
                          .count(),
                      written_us);
        } else {
            EXPECT_FALSE(lag[i].oldest_pending.has_value());
        }
        total += *lag[i].pending;
    }
    EXPECT_EQ(total, 30);
    // A bounded count is a lower bound, and says so.
    bool bounded = false;
    for (const auto& r : changefeed::estimate_lag(coll("lag_t"), "dash", 2)) {
        EXPECT_LE(r.pending.value_or(0), 2);
        if (!r.pending_exact) bounded = true;
    }
    EXPECT_TRUE(bounded);
}

TEST(Lag, RefusesAProcessorThatNeverRanAndBadLimits) {
    cftest::create_table(cluster(), "lag_never", 2);
    for (int limit : {0, 100001}) {
        try {
            changefeed::estimate_lag(coll("lag_never"), "x", limit);
            FAIL();
        } catch (const changefeed::Error& e) {
            EXPECT_EQ(e.code(), errc::invalid_option);
        }
    }
    try {
        changefeed::estimate_lag(coll("lag_never"), "never-ran");
        FAIL();
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), errc::processor_not_found);
        EXPECT_EQ(e.sqlstate(), "CF012");
    }
    try {
        changefeed::estimate_lag(coll("no_such_table"), "x");
        FAIL();
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.code(), errc::collection_not_found);
    }
}

}  // namespace
