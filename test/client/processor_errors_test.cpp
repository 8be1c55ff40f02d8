// Every error code the processor reports, and the SQL lease functions' input checks.
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <functional>
#include <vector>

using changefeed::errc;
using cftest::cluster;
using cftest::code_of;

CF_CLUSTER_ENVIRONMENT("errors", CF_TEST_PORT, true);

namespace {

class Errors : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        cftest::create_table(cluster(), "err_enabled", 2);
        cluster().exec("CREATE TABLE err_plain (id int PRIMARY KEY)");
    }
    changefeed::Collection enabled() { return {cluster().conninfo(), "err_enabled"}; }
};

TEST_F(Errors, EmptyProcessorName) {
    EXPECT_EQ(code_of([&] { auto p = changefeed::make_processor(enabled(), "", cftest::noop_handler()); }),
              errc::processor_name_empty);
}

// Refused at compile time: the all-versions feed's options have no
// start_from_beginning, and the latest-version ones do not convert to them.
static_assert(cftest::has_start_from_beginning<changefeed::LatestVersionOptions>);
static_assert(!cftest::has_start_from_beginning<changefeed::AllVersionsOptions>);
static_assert(!std::is_convertible_v<changefeed::LatestVersionOptions, changefeed::AllVersionsOptions>);

TEST_F(Errors, StartFromBeginningOnAllVersions) {
    EXPECT_TRUE(cftest::has_start_from_beginning<changefeed::LatestVersionOptions>);
    EXPECT_FALSE(cftest::has_start_from_beginning<changefeed::AllVersionsOptions>);
    EXPECT_FALSE((std::is_convertible_v<changefeed::LatestVersionOptions, changefeed::AllVersionsOptions>));
}

TEST_F(Errors, AlreadyStarted) {
    auto p = changefeed::make_processor(enabled(), "twice", cftest::noop_handler(), cftest::fast_options("i"));
    p.start();
    EXPECT_EQ(code_of([&] { p.start(); }), errc::already_started);
    p.stop();
    // A stopped processor may start again.
    EXPECT_EQ(code_of([&] { p.start(); }), std::error_code());
}

TEST_F(Errors, CollectionNotFound) {
    auto p = changefeed::make_processor({cluster().conninfo(), "no_such_table"}, "p", cftest::noop_handler());
    auto code = code_of([&] { p.start(); });
    EXPECT_EQ(code, errc::collection_not_found);
    EXPECT_EQ(p.state(), changefeed::State::stopped);
}

TEST_F(Errors, CollectionNotEnabled) {
    auto p = changefeed::make_processor({cluster().conninfo(), "err_plain"}, "p", cftest::noop_handler());
    EXPECT_EQ(code_of([&] { p.start(); }), errc::collection_not_enabled);
    EXPECT_EQ(code_of([&] { changefeed::Collection(cluster().conninfo(), "err_plain").describe(); }),
              errc::collection_not_enabled);
}

TEST_F(Errors, ServerUnreachable) {
    auto p = changefeed::make_processor({"host=/nonexistent port=1", "t"}, "p", cftest::noop_handler());
    EXPECT_EQ(code_of([&] { p.start(); }), errc::connection_failed);
}

TEST_F(Errors, InvalidInstanceName) {
    auto o = cftest::fast_options(std::string(300, 'x'));
    EXPECT_EQ(code_of([&] { changefeed::make_processor(enabled(), "p", cftest::noop_handler(), o); }),
              errc::instance_name_invalid);
}

TEST_F(Errors, InvalidOptions) {
    auto o = cftest::fast_options("i");
    o.renew_interval = o.lease_duration;
    EXPECT_EQ(code_of([&] { changefeed::make_processor(enabled(), "p", cftest::noop_handler(), o); }),
              errc::invalid_option);
    o = cftest::fast_options("i");
    o.max_batch_size = 0;
    EXPECT_EQ(code_of([&] { changefeed::make_processor(enabled(), "p", cftest::noop_handler(), o); }),
              errc::invalid_option);
}

TEST_F(Errors, ErrorsCarryTheirCategoryAndMessage) {
    std::error_code ec = errc::lease_lost;
    EXPECT_EQ(std::string(ec.category().name()), "changefeed");
    EXPECT_FALSE(ec.message().empty());
    changefeed::Error e(errc::history_lost, "gone", "CF006");
    EXPECT_EQ(e.sqlstate(), "CF006");
}

// Every Error reads as one line: the server's message, its detail, the
// SQLSTATE and the hint, then the code's text; the server's whole report
// (with its CONTEXT of PL/pgSQL function and line) stays in server_text().
TEST_F(Errors, EveryErrorIsOneLineWithItsCodeAndHint) {
    std::vector<changefeed::Error> seen;
    const auto keep = [&](const std::function<void()>& f) {
        try {
            f();
            ADD_FAILURE() << "no error";
        } catch (const changefeed::Error& e) {
            seen.push_back(e);
        }
    };
    keep([&] {
        changefeed::make_processor({cluster().conninfo(), "no_such_table"}, "p", cftest::noop_handler()).start();
    });
    keep([&] { changefeed::make_processor({cluster().conninfo(), "err_plain"}, "p", cftest::noop_handler()).start(); });
    keep([&] { changefeed::make_processor({"host=/nonexistent port=1", "t"}, "p", cftest::noop_handler()).start(); });
    keep([&] { changefeed::estimate_lag(enabled(), "never_ran"); });
    keep([&] {
        auto o = cftest::fast_options("i");
        o.start_position = "cf2.garbage";
        changefeed::make_processor(enabled(), "bad_position", cftest::noop_handler(), o).start();
    });
    keep([&] { changefeed::estimate_lag(enabled(), "p", 0); });
    ASSERT_EQ(seen.size(), 6u);
    for (const auto& e : seen) {
        const std::string what = e.what();
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_EQ(what.find("CONTEXT"), std::string::npos) << what;
        EXPECT_EQ(what.find("PL/pgSQL"), std::string::npos) << what;
        if (!e.sqlstate().empty()) {
            EXPECT_NE(what.find("(SQLSTATE " + e.sqlstate() + ")"), std::string::npos) << what;
            EXPECT_FALSE(e.server_text().empty());
        }
    }
    EXPECT_EQ(seen[1].code(), errc::collection_not_enabled);
    EXPECT_NE(std::string(seen[1].what()).find("Hint: Run SELECT changefeed.enable('public.err_plain')"),
              std::string::npos)
        << seen[1].what();
    EXPECT_EQ(seen[3].code(), errc::processor_not_found);
    EXPECT_NE(std::string(seen[3].what()).find("Hint: Start the processor first"), std::string::npos) << seen[3].what();
    EXPECT_NE(seen[3].server_text().find("CONTEXT"), std::string::npos) << seen[3].server_text();
}

TEST_F(Errors, DescribeReportsTheCollection) {
    auto info = enabled().describe();
    EXPECT_GT(info.id, 0);
    EXPECT_EQ(info.ranges, 2);
    EXPECT_EQ(info.channel, "changefeed_" + std::to_string(info.id));
    ASSERT_EQ(info.key_columns.size(), 1u);
    EXPECT_EQ(info.key_columns[0], "id");
}

// The SQL lease functions refuse bad input with their own SQLSTATEs.
std::string sqlstate_of(const std::string& sql) {
    try {
        cluster().exec(sql);
    } catch (const pqxx::sql_error& e) {
        return std::string(e.sqlstate());
    }
    return "";
}

TEST_F(Errors, LeaseFunctionsValidateTheirInput) {
    EXPECT_EQ(sqlstate_of("SELECT changefeed.lease_init('err_enabled', '')"), "CF011");
    EXPECT_EQ(sqlstate_of("SELECT changefeed.lease_init('err_enabled', NULL)"), "CF011");
    EXPECT_EQ(sqlstate_of("SELECT changefeed.lease_init('err_plain', 'p')"), "CF002");
    EXPECT_EQ(sqlstate_of("SELECT changefeed.lease_init('missing', 'p')"), "42P01");
    cluster().exec("SELECT changefeed.lease_init('err_enabled', 'sqlcheck')");
    EXPECT_EQ(sqlstate_of("SELECT * FROM changefeed.lease_acquire('err_enabled', 'sqlcheck', '', '1 s')"), "CF011");
    EXPECT_EQ(sqlstate_of("SELECT * FROM changefeed.lease_acquire('err_enabled', 'sqlcheck', 'i', '-1 s')"), "CF003");
    EXPECT_EQ(sqlstate_of("SELECT changefeed.lease_checkpoint('err_enabled', 'sqlcheck', 0, 'i', 1, 'garbage')"),
              "CF004");
    EXPECT_EQ(sqlstate_of("SELECT changefeed.lease_checkpoint('err_enabled', 'sqlcheck', 0, 'i', 1,"
                          " changefeed.current_position())"),
              "CF010");
    EXPECT_EQ(sqlstate_of("SELECT * FROM changefeed.backfill_page('err_enabled', 5, NULL)"), "CF003");
    // Names are data, never SQL.
    EXPECT_EQ(sqlstate_of("SELECT changefeed.lease_init('err_enabled', 'x''); DROP TABLE err_plain; --')"), "");
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM err_plain")[0][0].as<int>(), 0);
}

}  // namespace

namespace {

TEST_F(Errors, DisablingTheTableStopsARunningProcessor) {
    cftest::create_table(cluster(), "err_disabled", 2);
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("i");
    o.on_error = errors.sink();
    auto p = changefeed::make_processor({cluster().conninfo(), "err_disabled"}, "p", cftest::noop_handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    cluster().exec("SELECT changefeed.disable('err_disabled')");
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::stopped; }));
    auto seen = errors.all();
    ASSERT_FALSE(seen.empty());
    EXPECT_EQ(seen[0].code, errc::collection_not_enabled);
}

TEST_F(Errors, StopFromInsideTheHandlerDoesNotDeadlock) {
    cftest::create_table(cluster(), "err_self_stop", 2);
    changefeed::Processor* self = nullptr;
    std::atomic<bool> called{false};
    auto p = changefeed::make_processor(
        {cluster().conninfo(), "err_self_stop"}, "p",
        [&](const std::vector<changefeed::Change>&, const changefeed::Context& ctx) {
            self->stop();
            EXPECT_TRUE(ctx.stop.stop_requested());
            called = true;
        },
        cftest::fast_options("i"));
    self = &p;
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    cluster().exec("INSERT INTO err_self_stop (id) VALUES (1)");
    ASSERT_TRUE(cftest::eventually([&] { return called.load(); }));
    p.stop();
    EXPECT_EQ(p.state(), changefeed::State::stopped);
}

}  // namespace

namespace {

TEST_F(Errors, HistoryLostHaltsWithARunbook) {
    cftest::create_table(cluster(), "err_history", 2);
    cftest::ErrorLog log;
    auto o = cftest::fast_options("i");
    o.on_error = log.sink();
    cftest::Recorder rec;
    auto p = changefeed::make_processor({cluster().conninfo(), "err_history"}, "p", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    p.stop();
    // A write after the checkpoint, then retention "drops" it (as prune() records it).
    auto txid = cluster().exec("INSERT INTO err_history (id) VALUES (1); SELECT pg_current_xact_id()::text");
    cluster().exec("INSERT INTO changefeed.horizon (collection_id, dropped_txid, dropped_before)"
                   " VALUES ((changefeed.collection_of('err_history')).id, '" +
                   txid[0][0].as<std::string>() + "', now())");
    p.start();
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::history_lost; }));
    EXPECT_EQ(rec.size(), 0u);  // never a silent restart from now
    {
        auto lost = log.messages(errc::history_lost);
        ASSERT_FALSE(lost.empty());
        EXPECT_NE(lost.back().find("runbook"), std::string::npos);
        EXPECT_NE(lost.back().find("SELECT changefeed.drop_processor('err_history', 'p');"), std::string::npos)
            << lost.back();
        // The recovery policy's halt names its runbook, then says the range halted.
        auto errors = log.all();
        ASSERT_GE(errors.size(), 2u);
        EXPECT_EQ(errors[errors.size() - 2].runbook, "docs/runbooks/history-lost.md");
        EXPECT_EQ(errors.back().code, errc::halted);
    }
    p.stop();
    EXPECT_EQ(p.state(), changefeed::State::history_lost);
}

}  // namespace
