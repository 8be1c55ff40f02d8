// The changefeed command-line tool (client/cli), run as a separate process
// against a real cluster: each subcommand's output and exit code, connection
// options like psql's, and the refusals a non-superuser role meets on another
// role's processor.
#include "support/cluster.hpp"
#include "support/recorder.hpp"
#include "support/shell.hpp"

#include <sys/wait.h>

#include <csignal>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

using cftest::cluster;
using namespace std::chrono_literals;

CF_CLUSTER_ENVIRONMENT("cli", CF_TEST_PORT, true);

namespace {

struct CliRun {
    int code = -1;
    std::string out;
    std::string err;
};

using cftest::quote;
using cftest::slurp;

std::atomic<int> run_counter{0};

// Runs the tool with `args` (after `env`, e.g. "PGUSER=x"); stdout and stderr
// kept apart.  With `pid_file`, the tool's pid is written there first.
CliRun run_env(const std::string& env, const std::vector<std::string>& args, const std::string& pid_file = "") {
    const std::string base = std::string(CF_TEST_DIR) + "-cli-run-" + std::to_string(run_counter++);
    std::string cmd = env + (env.empty() ? "" : " ") + quote(CF_CLI);
    for (const auto& a : args) cmd += " " + quote(a);
    cmd += " >" + base + ".out 2>" + base + ".err";
    // The shell becomes the tool (exec), so its pid is the tool's.
    if (!pid_file.empty()) cmd = "echo $$ >" + quote(pid_file) + " && exec " + (env.empty() ? "" : "env ") + cmd;
    const int status = std::system(cmd.c_str());
    CliRun r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(base + ".out");
    r.err = slurp(base + ".err");
    std::remove((base + ".out").c_str());
    std::remove((base + ".err").c_str());
    return r;
}

// Runs the tool as `user`, connecting with -d and a connection string.
CliRun run_as(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"-d", cluster().conninfo_as(user)});
    return run_env("", args);
}

CliRun run(std::vector<std::string> args) { return run_as("postgres", std::move(args)); }

// A run of the tool (as postgres) on a thread of its own.  However the test
// ends, the tool is killed and the thread joined: a failed assertion never
// leaves a joinable thread behind (std::terminate) or a tool running on.
class BackgroundRun {
public:
    explicit BackgroundRun(std::vector<std::string> args) : pid_file_(cftest::test_file("cli.pid")) {
        args.insert(args.begin(), {"-d", cluster().conninfo()});
        thread_ = std::thread([this, args] {
            result_ = run_env("", args, pid_file_);
            done_ = true;
        });
    }
    BackgroundRun(const BackgroundRun&) = delete;
    BackgroundRun& operator=(const BackgroundRun&) = delete;
    ~BackgroundRun() {
        if (!thread_.joinable()) return;
        // The pid is written before the tool runs; a thread that is done has none to kill.
        cftest::eventually([&] { return done_ || !slurp(pid_file_).empty(); }, 10s);
        const int pid = std::atoi(slurp(pid_file_).c_str());
        if (!done_ && pid > 0) ::kill(pid, SIGKILL);
        thread_.join();
        std::remove(pid_file_.c_str());
    }
    // Waits until the tool exits; what it did.
    CliRun wait() {
        thread_.join();
        std::remove(pid_file_.c_str());
        return result_;
    }

private:
    std::string pid_file_;
    std::atomic<bool> done_{false};
    CliRun result_;
    std::thread thread_;
};

bool contains(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

int count_of(const std::string& text, const std::string& what) {
    int n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
    return n;
}

std::string value(const std::string& sql) { return cluster().exec(sql)[0][0].as<std::string>(); }

changefeed::Collection coll(const std::string& table, const std::string& user = "postgres") {
    return changefeed::Collection(cluster().conninfo_as(user), table);
}

// Processor "billing" of role cli_owner, started on a new table `t` of four
// ranges that `readers` may read.
changefeed::Processor start_billing(const std::string& t, const std::string& readers, cftest::Recorder& d) {
    cftest::create_table(cluster(), t, 4);
    cluster().exec("GRANT SELECT ON " + t + " TO " + readers);
    changefeed::LatestVersionOptions o(cftest::fast_options("inst-a"));
    auto p = changefeed::make_processor(coll(t, "cli_owner"), "billing", d.handler(), o);
    p.start();
    return p;
}

// Whether a tail of this tool (fallback application name "changefeed") reads
// the log: it resolved its start position before its first read.
bool tail_reading() {
    // During a read its query is read(); after one, the COMMIT that ends it (tail
    // sends no COMMIT before its first read, which comes after it took "now").
    return cluster()
               .exec("SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE application_name = 'changefeed'"
                     "   AND (query LIKE '%changefeed.read(%' OR query = 'COMMIT')")[0][0]
               .as<int>() > 0;
}

class CliTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        cftest::create_login_role(cluster(), "cli_reader", {"changefeed_reader"});
        cftest::create_login_role(cluster(), "cli_owner", {"changefeed_processor"});
        cftest::create_login_role(cluster(), "cli_other", {"changefeed_processor"});
        cftest::create_login_role(cluster(), "cli_nobody");
    }
};

TEST_F(CliTest, UsageErrorsExitTwo) {
    EXPECT_EQ(run({}).code, 2);
    EXPECT_EQ(run({"frobnicate"}).code, 2);
    EXPECT_EQ(run({"tail"}).code, 2);  // TABLE missing
    EXPECT_EQ(run({"tail", "t", "--format", "xml"}).code, 2);
    EXPECT_EQ(run({"checkpoint", "t", "p"}).code, 2);  // --to missing
    // The library's keyword with a value it does not know: a bad argument, said before connecting.
    auto pooler = run_env("", {"-d", "dbname=postgres changefeed_pooler=statement", "status"});
    EXPECT_EQ(pooler.code, 2) << pooler.err;
    EXPECT_TRUE(contains(pooler.err, "changefeed_pooler must be transaction, session or none")) << pooler.err;
    auto help = run({"--help"});
    EXPECT_EQ(help.code, 0);
    EXPECT_TRUE(contains(help.out, "tail")) << help.out;
    EXPECT_TRUE(contains(help.out, "Exit codes")) << help.out;
}

TEST_F(CliTest, ConnectionFailureExitsThree) {
    auto r = run_env("", {"-h", "/nonexistent-socket-dir", "-p", "1", "status"});
    EXPECT_EQ(r.code, 3) << r.err;
    EXPECT_TRUE(contains(r.err, "could not connect")) << r.err;
}

TEST_F(CliTest, ConnectsWithHostPortUserOptionsAndPgVariables) {
    const auto& c = cluster();
    const std::string dir = std::string(CF_TEST_DIR) + "-cli";
    auto a = run_env("", {"-h", dir, "-p", std::to_string(c.port()), "-U", "postgres", "-d", "postgres", "status"});
    EXPECT_EQ(a.code, 0) << a.err;
    auto b = run_env("PGHOST=" + quote(dir) + " PGPORT=" + std::to_string(c.port()) +
                         " PGUSER=cli_reader PGDATABASE=postgres",
                     {"status"});
    EXPECT_EQ(b.code, 0) << b.err;
    EXPECT_TRUE(contains(b.out, "skipped: only members of changefeed_admin")) << b.out;
}

TEST_F(CliTest, TailFromBeginningInEachFormat) {
    const auto t = cftest::test_table("cli");
    cftest::create_table(cluster(), t, 4);
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (1, 'one'), (2, 'two'); UPDATE " + t +
                   " SET v = 'uno' WHERE id = 1; DELETE FROM " + t + " WHERE id = 2");

    auto text = run({"tail", t, "--from", "beginning", "--count", "4", "--timeout", "20"});
    ASSERT_EQ(text.code, 0) << text.err;
    EXPECT_EQ(count_of(text.out, "\n"), 4) << text.out;
    EXPECT_TRUE(contains(text.out, "create")) << text.out;
    EXPECT_TRUE(contains(text.out, "replace")) << text.out;
    EXPECT_TRUE(contains(text.out, "delete")) << text.out;
    EXPECT_TRUE(contains(text.out, "\"uno\"")) << text.out;
    EXPECT_TRUE(contains(text.err, "position: cf")) << text.err;

    auto json = run({"tail", t, "--from", "beginning", "--count", "4", "--format", "json"});
    ASSERT_EQ(json.code, 0) << json.err;
    EXPECT_EQ(count_of(json.out, "\"operation\":"), 4) << json.out;
    EXPECT_TRUE(contains(json.out, "\"operation\":\"delete\"")) << json.out;
    EXPECT_TRUE(contains(json.out, "\"position\":\"cf")) << json.out;

    auto ce = run({"tail", t, "--from", "beginning", "--count", "1", "--format", "cloudevents"});
    ASSERT_EQ(ce.code, 0) << ce.err;
    EXPECT_TRUE(contains(ce.out, "\"specversion\":\"1.0\"")) << ce.out;
    EXPECT_TRUE(contains(ce.out, "\"type\":\"changefeed.create\"")) << ce.out;
    EXPECT_TRUE(contains(ce.out, "/postgres/public." + t)) << ce.out;

    // A filter runs in the database: only the matching change, the replace
    // that made the document match, as a create into the filter's view.
    auto f = run({"tail", t, "--from", "beginning", "--filter", "$.v == \"uno\"", "--count", "1", "--format", "json",
                  "--timeout", "5"});
    ASSERT_EQ(f.code, 0) << f.err;
    EXPECT_EQ(count_of(f.out, "\"operation\":"), 1) << f.out;
    EXPECT_TRUE(contains(f.out, "\"operation\":\"create\"")) << f.out;
    EXPECT_TRUE(contains(f.out, ".create\"")) << f.out;
    EXPECT_TRUE(contains(f.out, "\"previous\":null")) << f.out;
}

// Numbers leave as PostgreSQL stored them in every format that carries the
// documents: a numeric beyond a double's digits, trailing zeros, 2^53 + 1.
TEST_F(CliTest, TailKeepsEveryDigitOfANumber) {
    const auto t = cftest::test_table("cli_exact");
    cluster().exec("CREATE TABLE " + t + " (id int PRIMARY KEY, amount numeric(30,2), cents numeric, big bigint);" +
                   "SELECT changefeed.enable('" + t + "', ranges => 2)");
    cluster().exec("INSERT INTO " + t + " VALUES (1, 12345678901234567.89, 0.10, 9007199254740993)");
    for (const std::string format : {"text", "json", "cloudevents", "debezium"}) {
        auto r = run({"tail", t, "--from", "beginning", "--count", "1", "--format", format, "--timeout", "20"});
        ASSERT_EQ(r.code, 0) << format << ": " << r.err;
        EXPECT_TRUE(contains(r.out, "\"amount\": 12345678901234567.89")) << format << ": " << r.out;
        EXPECT_TRUE(contains(r.out, "\"cents\": 0.10")) << format << ": " << r.out;
        EXPECT_TRUE(contains(r.out, "\"big\": 9007199254740993")) << format << ": " << r.out;
    }
}

TEST_F(CliTest, TailFollowsNewChangesAndResumesFromItsPosition) {
    const auto t = cftest::test_table("cli");
    cftest::create_table(cluster(), t, 4);
    BackgroundRun tail({"tail", t, "--count", "2", "--timeout", "30", "--format", "json"});
    ASSERT_TRUE(cftest::eventually(tail_reading)) << "the tail never read";  // it has taken "now" by then
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (10, 'a')");
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (11, 'b')");
    const CliRun r = tail.wait();
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.out, "\"doc_id\":\"10\"")) << r.out;
    EXPECT_TRUE(contains(r.out, "\"doc_id\":\"11\"")) << r.out;

    // The position printed at the end resumes after what was shown.
    const auto p = r.err.find("position: ");
    ASSERT_NE(p, std::string::npos) << r.err;
    const std::string pos = r.err.substr(p + 10, r.err.find('\n', p) - p - 10);
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (12, 'c')");
    auto next = run({"tail", t, "--from", pos, "--count", "1", "--format", "json", "--timeout", "10"});
    ASSERT_EQ(next.code, 0) << next.err;
    EXPECT_TRUE(contains(next.out, "\"doc_id\":\"12\"")) << next.out;

    // From a time: what was written since then.
    const std::string before = value("SELECT now()::text");
    // The write comes after that time by the server's clock.
    ASSERT_TRUE(cftest::eventually([&] {
        return value("SELECT clock_timestamp() > '" + before + "'::timestamptz") == "t";
    }));
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (13, 'd')");
    auto since = run({"tail", t, "--from", before, "--count", "1", "--format", "json", "--timeout", "10"});
    ASSERT_EQ(since.code, 0) << since.err;
    EXPECT_TRUE(contains(since.out, "\"doc_id\":\"13\"")) << since.out;

    // --count not reached by --timeout: exit 7.
    auto late = run({"tail", t, "--count", "5", "--timeout", "1"});
    EXPECT_EQ(late.code, 7) << late.err;
    EXPECT_TRUE(contains(late.err, "timed out after 0 of 5")) << late.err;
    // --timeout alone ends normally.
    EXPECT_EQ(run({"tail", t, "--timeout", "0.5"}).code, 0);
}

TEST_F(CliTest, TailErrorsMapToExitCodes) {
    const auto t = cftest::test_table("cli");
    cftest::create_table(cluster(), t, 4);
    cluster().exec("CREATE TABLE cli_plain (id int PRIMARY KEY)");
    auto missing = run({"tail", "no_such_table", "--timeout", "1"});
    EXPECT_EQ(missing.code, 4) << missing.err;
    EXPECT_TRUE(contains(missing.err, "42P01")) << missing.err;
    auto plain = run({"tail", "cli_plain", "--timeout", "1"});
    EXPECT_EQ(plain.code, 4) << plain.err;
    EXPECT_TRUE(contains(plain.err, "CF002")) << plain.err;
    auto bad = run({"tail", t, "--from", "cf2.not-a-position", "--timeout", "1"});
    EXPECT_EQ(bad.code, 2) << bad.err;
    EXPECT_TRUE(contains(bad.err, "CF004")) << bad.err;
    auto badtime = run({"tail", t, "--from", "not a time", "--timeout", "1"});
    EXPECT_EQ(badtime.code, 2) << badtime.err;
    // No SELECT on the table: privilege denied.
    auto denied = run_as("cli_reader", {"tail", t, "--timeout", "1"});
    EXPECT_EQ(denied.code, 5) << denied.err;
    EXPECT_TRUE(contains(denied.err, "42501")) << denied.err;
    // History lost: retention dropped what the start time needs.
    cluster().exec("INSERT INTO changefeed.horizon (collection_id, dropped_txid, dropped_before, dropped_at)"
                   " SELECT id, pg_current_xact_id(), now(), now() FROM changefeed.collection WHERE relid = '" +
                   t + "'::regclass");
    auto lost = run({"tail", t, "--from", "2000-01-01", "--timeout", "1"});
    EXPECT_EQ(lost.code, 6) << lost.err;
    EXPECT_TRUE(contains(lost.err, "CF006")) << lost.err;
    // "beginning" starts after what retention dropped: no error.
    EXPECT_EQ(run({"tail", t, "--from", "beginning", "--timeout", "0.5"}).code, 0);
}

TEST_F(CliTest, StatusShowsCollectionsPartitionsWorkersAndVerify) {
    const auto t = cftest::test_table("cli");
    cftest::create_table(cluster(), t, 8);
    cluster().exec("INSERT INTO " + t + " (id) VALUES (1)");
    auto s = run({"status"});
    ASSERT_EQ(s.code, 0) << s.err;
    EXPECT_TRUE(contains(s.out, t)) << s.out;
    EXPECT_TRUE(contains(s.out, "7 days")) << s.out;
    EXPECT_TRUE(contains(s.out, "Log partitions")) << s.out;
    EXPECT_TRUE(contains(s.out, "log_default")) << s.out;
    EXPECT_TRUE(contains(s.out, "library preloaded: yes")) << s.out;
    EXPECT_TRUE(contains(s.out, "changefeed notifier")) << s.out;
    EXPECT_TRUE(contains(s.out, t + ": intact")) << s.out;
    // A reader sees only the tables it may SELECT, and no verify().
    auto r = run_as("cli_reader", {"status"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_FALSE(contains(r.out, t)) << r.out;
    // A role outside the changefeed roles may not look at all.
    EXPECT_EQ(run_as("cli_nobody", {"status"}).code, 5);

    // A capture forced off past the guard (a superuser can): verify() says so, exit 9.
    cluster().exec("SELECT changefeed.suspend_guard(true); ALTER TABLE " + t +
                   " DISABLE TRIGGER changefeed_capture; SELECT changefeed.suspend_guard(false)");
    auto broken = run({"status"});
    EXPECT_EQ(broken.code, 9) << broken.out << broken.err;
    EXPECT_TRUE(contains(broken.out, t + ": NOT INTACT: ")) << broken.out;
    cluster().exec("DROP TABLE " + t);
    EXPECT_EQ(run({"status"}).code, 0);
}

TEST_F(CliTest, ProcessorsAndLagOfARunningProcessor) {
    const auto t = cftest::test_table("cli");
    cftest::Recorder d;
    auto p = start_billing(t, "cli_owner", d);
    ASSERT_TRUE(cftest::wait_running(p, 4));

    auto procs = run_as("cli_owner", {"processors", t});
    ASSERT_EQ(procs.code, 0) << procs.err;
    EXPECT_TRUE(contains(procs.out, "processor \"billing\" (owner role cli_owner): 4 ranges, 4 with a live lease"))
        << procs.out;
    EXPECT_TRUE(contains(procs.out, "inst-a (live")) << procs.out;
    EXPECT_EQ(count_of(procs.out, "inst-a    yes"), 4) << procs.out;
    // Another role does not see it.
    auto other = run_as("cli_other", {"processors", t});
    EXPECT_EQ(other.code, 0) << other.err;
    EXPECT_TRUE(contains(other.out, "no processors")) << other.out;

    auto lag = run_as("cli_owner", {"lag", t, "billing"});
    ASSERT_EQ(lag.code, 0) << lag.err;
    EXPECT_TRUE(contains(lag.out, "lag of processor \"billing\"")) << lag.out;
    EXPECT_TRUE(contains(lag.out, "4 of 4 ranges with a live lease")) << lag.out;
    EXPECT_FALSE(contains(lag.out, "WARNING")) << lag.out;
    // Another role may not see its lag; a processor that never ran is not found.
    EXPECT_EQ(run_as("cli_other", {"lag", t, "billing"}).code, 5);
    EXPECT_EQ(run_as("cli_owner", {"lag", t, "never_ran"}).code, 4);

    // --watch without a terminal: frame after frame (a scaled bound: two
    // frames need one interval and two reports).
    const auto watch_for = std::to_string(cftest::scaled(1200ms).count() / 1000.0);
    auto watch = run_as("cli_owner", {"lag", t, "billing", "--watch", "0.3", "--timeout", watch_for});
    EXPECT_EQ(watch.code, 0) << watch.err;
    EXPECT_GE(count_of(watch.out, "lag of processor"), 2) << watch.out;

    // Stopped, with a change pending longer than half a short retention: a warning, exit 9.
    p.stop();
    cluster().exec("SELECT changefeed.alter('" + t + "', retention => '4 seconds')");
    cluster().exec("INSERT INTO " + t + " (id) VALUES (1)");
    // Pending longer than 2 s by the server's clock, which the lag compares with.
    ASSERT_TRUE(cftest::eventually([&] {
        return cluster()
            .exec("SELECT max(written_at) < now() - interval '2.5 seconds' FROM changefeed.log l"
                  "  JOIN changefeed.collection c ON c.id = l.collection_id"
                  " WHERE c.relid = '" +
                  t + "'::regclass")[0][0]
            .as<bool>();
    }));
    auto warn = run_as("cli_owner", {"lag", t, "billing"});
    EXPECT_EQ(warn.code, 9) << warn.out << warn.err;
    EXPECT_TRUE(contains(warn.out, "WARNING: range")) << warn.out;
    EXPECT_TRUE(contains(warn.out, "of the retention (warning above 50.0%)")) << warn.out;
    EXPECT_EQ(run_as("cli_owner", {"lag", t, "billing", "--warn", "100%"}).code, 0);
    EXPECT_EQ(run_as("cli_owner", {"lag", t, "billing", "--warn", "2"}).code, 2);
}

TEST_F(CliTest, CheckpointMovesARunningProcessorBackAndOnlyItsOwnerMay) {
    const auto t = cftest::test_table("cli");
    cftest::Recorder d;
    auto p = start_billing(t, "cli_owner, cli_other", d);
    ASSERT_TRUE(cftest::wait_running(p, 4));
    const std::string before = value("SELECT changefeed.current_position()");
    const std::string before_time = value("SELECT now()::text");
    cluster().exec("INSERT INTO " + t + " (id, v) VALUES (1, 'a'), (2, 'b'), (3, 'c')");
    ASSERT_TRUE(cftest::eventually([&] { return d.count("1") == 1 && d.count("2") == 1 && d.count("3") == 1; }));
    const std::string epochs = value("SELECT sum(epoch)::text FROM changefeed.lease WHERE processor = 'billing'"
                                     " AND collection_id = (changefeed.collection_of('" +
                                     t + "')).id");

    // Another processor role is refused, whatever it tries.
    for (const auto& args : std::vector<std::vector<std::string>>{{"checkpoint", t, "billing", "--to", "now"},
                                                                  {"checkpoint", t, "billing", "--to", before},
                                                                  {"reset", t, "billing", "--yes"},
                                                                  {"resync", t, "billing"}}) {
        auto r = run_as("cli_other", args);
        EXPECT_EQ(r.code, 5) << args[0] << ": " << r.err;
        EXPECT_TRUE(contains(r.err, "42501")) << r.err;
        EXPECT_TRUE(contains(r.err, "belongs to role cli_owner")) << r.err;
    }
    EXPECT_EQ(value("SELECT sum(epoch)::text FROM changefeed.lease WHERE processor = 'billing'"
                    " AND collection_id = (changefeed.collection_of('" +
                    t + "')).id"),
              epochs);

    // The owner moves the running processor back: it is fenced and re-reads.
    auto back = run_as("cli_owner", {"checkpoint", t, "billing", "--to", before});
    ASSERT_EQ(back.code, 0) << back.err;
    EXPECT_TRUE(contains(back.out, "moved the checkpoints of 4 range(s)")) << back.out;
    EXPECT_TRUE(cftest::eventually([&] { return d.count("1") == 2 && d.count("2") == 2 && d.count("3") == 2; }))
        << d.count("1") << d.count("2") << d.count("3");
    EXPECT_GT(std::stoll(value("SELECT sum(epoch)::text FROM changefeed.lease WHERE processor = 'billing'"
                               " AND collection_id = (changefeed.collection_of('" +
                               t + "')).id")),
              std::stoll(epochs));

    // By time, through position_at(), and for one range only.
    auto by_time = run_as("cli_owner", {"checkpoint", t, "billing", "--to", before_time, "--range", "0"});
    ASSERT_EQ(by_time.code, 0) << by_time.err;
    EXPECT_TRUE(contains(by_time.out, "moved the checkpoints of 1 range(s)")) << by_time.out;
    EXPECT_TRUE(contains(by_time.out, "the position at " + before_time)) << by_time.out;
    EXPECT_EQ(run_as("cli_owner", {"checkpoint", t, "billing", "--to", "now", "--range", "7"}).code, 2);
    EXPECT_EQ(run_as("cli_owner", {"checkpoint", t, "billing", "--to", "beginning"}).code, 2);
    EXPECT_EQ(run_as("cli_owner", {"checkpoint", t, "nobody", "--to", "now"}).code, 4);

    // Reset: refused while an instance runs, a dry run without --yes, then forgotten.
    auto busy = run_as("cli_owner", {"reset", t, "billing", "--yes"});
    EXPECT_EQ(busy.code, 8) << busy.err;
    EXPECT_TRUE(contains(busy.err, "inst-a")) << busy.err;
    p.stop();
    auto dry = run_as("cli_owner", {"reset", t, "billing"});
    EXPECT_EQ(dry.code, 2) << dry.err;
    EXPECT_TRUE(contains(dry.out, "Nothing was changed")) << dry.out;
    EXPECT_TRUE(contains(dry.out, "FIRST start")) << dry.out;
    EXPECT_EQ(run_as("cli_owner", {"lag", t, "billing"}).code, 0);  // still there
    auto reset = run_as("cli_owner", {"reset", t, "billing", "--yes"});
    EXPECT_EQ(reset.code, 0) << reset.err;
    EXPECT_TRUE(contains(reset.out, "forgot processor \"billing\"")) << reset.out;
    EXPECT_EQ(run_as("cli_owner", {"lag", t, "billing"}).code, 4);
    EXPECT_EQ(run_as("cli_owner", {"reset", t, "billing", "--yes"}).code, 4);
}

TEST_F(CliTest, ResyncRestartsABackfillThatBackfillFollows) {
    const auto t = cftest::test_table("cli");
    cftest::create_table(cluster(), t, 4);
    cluster().exec("INSERT INTO " + t + " (id, v) SELECT g, 'v' FROM generate_series(1, 400) g; ANALYZE " + t);
    cftest::Recorder d;
    changefeed::LatestVersionOptions o(cftest::fast_options("inst-a"));
    o.max_batch_size = 20;
    auto p = changefeed::make_processor(coll(t), "view", d.handler(30ms), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));

    auto idle = run({"backfill", t});
    EXPECT_EQ(idle.code, 0) << idle.err;
    EXPECT_TRUE(contains(idle.out, "no backfill in progress")) << idle.out;

    auto r = run({"resync", t, "view", "--wait", "--timeout", "120"});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_TRUE(contains(r.out, "4 range(s) of processor \"view\"")) << r.out;
    EXPECT_TRUE(contains(r.out, "about 400 rows")) << r.out;
    EXPECT_TRUE(contains(r.out, "rows/s")) << r.out;  // plain progress lines: stdout is no terminal
    EXPECT_FALSE(contains(r.out, "\r")) << r.out;
    EXPECT_TRUE(contains(r.out, "backfill done: 400 rows")) << r.out;
    EXPECT_GE(d.from_backfill(), 400u);

    // Followed from another run, and given up at --timeout.
    cluster().exec("SELECT changefeed.resync_processor('" + t + "', 'view')");
    auto follow = run({"backfill", t, "view", "--interval", "0.2", "--timeout", "0.5"});
    EXPECT_TRUE(follow.code == 7 || follow.code == 0) << follow.err;
    EXPECT_TRUE(contains(follow.out, "backfill on " + t + " for processor \"view\"")) << follow.out;
    auto done = run({"backfill", t, "view", "--timeout", "120"});
    EXPECT_EQ(done.code, 0) << done.err;
    EXPECT_EQ(run({"backfill", t, "nobody"}).code, 4);
    EXPECT_EQ(run({"resync", t, "view", "--range", "9"}).code, 2);
    p.stop();
}

TEST_F(CliTest, MaintainRunsMaintenance) {
    auto m = run_as("cli_owner", {"maintain"});
    ASSERT_EQ(m.code, 0) << m.err;
    EXPECT_TRUE(contains(m.out, "partitions created: ")) << m.out;
    EXPECT_TRUE(contains(m.out, "partitions dropped: ")) << m.out;
    auto denied = run_as("cli_reader", {"maintain"});
    EXPECT_EQ(denied.code, 5) << denied.err;
}

}  // namespace
