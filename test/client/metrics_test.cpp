// Metrics and log records of processors against a real cluster: the counts
// equal what the handler was given, errors are counted by code, leases
// acquired, lost and released as a second instance joins and leaves,
// reconnects after the server cut the connections, a projector's duplicates,
// the log sink's records (and the default logfmt lines on stderr), the
// Prometheus exposition scraped over HTTP, and the processor_status view.
#include "support/cluster.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"

#ifdef CF_WITH_PROMETHEUS
#include <changefeed/prometheus_metrics.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#endif

#include <atomic>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

using namespace std::chrono_literals;
using changefeed::errc;
using changefeed::LogEvent;
using changefeed::LogRecord;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("metrics", CF_TEST_PORT, true);

namespace {

// Keeps what a log sink was given.
class LogBook {
public:
    changefeed::LogSink sink() {
        return [this](const LogRecord& r) {
            std::lock_guard lock(mu_);
            records_.push_back(r);
        };
    }
    std::vector<LogRecord> all() const {
        std::lock_guard lock(mu_);
        return records_;
    }
    std::vector<LogRecord> of(LogEvent e) const {
        std::vector<LogRecord> out;
        for (auto& r : all())
            if (r.event == e) out.push_back(r);
        return out;
    }
    // The ranges named by every record of `e`, in order.
    std::vector<int> ranges_of(LogEvent e) const {
        std::vector<int> out;
        for (auto& r : of(e)) out.insert(out.end(), r.ranges.begin(), r.ranges.end());
        std::sort(out.begin(), out.end());
        return out;
    }

private:
    mutable std::mutex mu_;
    std::vector<LogRecord> records_;
};

changefeed::Collection coll(const std::string& table) { return {cluster().conninfo(), table}; }

// Quick, but with leases that do not expire on a loaded machine: the lease
// counts asserted below come from starts, balancing and stops only.
changefeed::LatestVersionOptions steady_options(const std::string& instance) {
    changefeed::LatestVersionOptions o = cftest::fast_options(instance);
    o.lease_duration = 20s;
    o.renew_interval = 2s;
    return o;
}

// A copy: snapshots are often temporaries.
changefeed::ProcessorMetrics of(const changefeed::MetricsSnapshot& s, const std::string& table,
                                const std::string& processor, const std::string& instance) {
    // Measurements name the table as the catalog does: "schema.table".
    const std::string qualified = table.find('.') == std::string::npos ? "public." + table : table;
    auto it = s.find(changefeed::MetricScope{qualified, processor, instance});
    return it == s.end() ? changefeed::ProcessorMetrics{} : it->second;
}

void insert_rows(const std::string& table, int from, int to) {
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(from) +
                   ", " + std::to_string(to) + ") g");
}

TEST(Metrics, CountsEqualWhatWasDelivered) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 4);
    auto metrics = std::make_shared<changefeed::InProcessMetrics>();
    std::mutex mu;
    std::map<int, std::int64_t> changes, batches;
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.metrics = metrics;
    o.max_batch_size = 7;
    o.log = [](const LogRecord&) {};
    auto p = changefeed::make_processor(
        coll(table), "counted",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
            std::this_thread::sleep_for(3ms);
            std::lock_guard lock(mu);
            changes[ctx.range_id] += static_cast<std::int64_t>(batch.size());
            ++batches[ctx.range_id];
        },
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    insert_rows(table, 1, 60);
    insert_rows(table, 61, 100);
    ASSERT_TRUE(cftest::eventually([&] {
        std::lock_guard lock(mu);
        std::int64_t n = 0;
        for (auto& [r, c] : changes) n += c;
        return n >= 100;
    }));
    // Every range caught up: its lag is zero once a read found nothing waiting.
    ASSERT_TRUE(cftest::eventually([&] {
        const auto pm = of(metrics->snapshot(), table, "counted", "i1");
        if (pm.ranges.size() != 4) return false;
        for (auto& [r, rm] : pm.ranges)
            if (!rm.lag || *rm.lag != 0ms) return false;
        return true;
    }));
    // The view agrees on who holds what.
    EXPECT_EQ(
        cluster()
            .exec("SELECT count(*) FROM changefeed.processor_status WHERE table_name = '" + table +
                  "'::regclass AND processor = 'counted' AND instance = 'i1' AND live AND pending_estimate = 0")[0][0]
            .as<int>(),
        4);
    p.stop();
    const auto s = metrics->snapshot();
    const auto pm = of(s, table, "counted", "i1");
    std::lock_guard lock(mu);
    EXPECT_EQ(pm.changes(), 100);
    std::int64_t all_batches = 0;
    for (auto& [range, rm] : pm.ranges) {
        EXPECT_EQ(rm.changes, changes[range]) << "range " << range;
        EXPECT_EQ(rm.batches, batches[range]) << "range " << range;
        all_batches += batches[range];
        // Each batch's handler time is in the histogram; each took 3 ms or more.
        EXPECT_EQ(rm.handler_time.count, rm.batches);
        EXPECT_GE(rm.handler_time.sum, 0.003 * static_cast<double>(rm.batches));
        std::int64_t in_buckets = 0;
        for (auto c : rm.handler_time.counts) in_buckets += c;
        EXPECT_EQ(in_buckets, rm.batches);
        EXPECT_EQ(rm.handler_time.counts[0], 0) << "no batch took 1 ms or less";
        EXPECT_EQ(rm.lease_acquisitions, 1);
        EXPECT_EQ(rm.lease_releases, 1);
        EXPECT_EQ(rm.lease_losses, 0);
        EXPECT_FALSE(rm.lease_held);
        EXPECT_FALSE(rm.lag) << "no lag is reported for a range no longer held";
    }
    EXPECT_EQ(pm.batches(), all_batches);
    EXPECT_GE(all_batches, 100 / 7);  // max_batch_size 7: at least 15 batches
    EXPECT_EQ(pm.leases_held(), 0);
    EXPECT_TRUE(pm.errors.empty());
}

TEST(Metrics, ErrorsAreCountedByCodeAndLogged) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 1);
    auto metrics = std::make_shared<changefeed::InProcessMetrics>();
    LogBook log;
    std::atomic<int> told{0}, calls{0};
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.metrics = metrics;
    o.log = log.sink();
    o.on_error = [&](const changefeed::ErrorInfo&) { ++told; };
    // Two failures in a row halt the range.
    o.recovery = [](const changefeed::Incident& i) {
        if (i.situation == changefeed::Situation::handler_failing && i.consecutive_failures >= 2)
            return changefeed::RecoveryDecision::halt(changefeed::State::stopped, "handler-failing");
        return changefeed::default_recovery(i);
    };
    auto p = changefeed::make_processor(
        coll(table), "failing",
        [&](const std::vector<changefeed::Change>&, const changefeed::Context&) {
            ++calls;
            throw std::runtime_error("projection store unavailable");
        },
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1));
    insert_rows(table, 1, 3);
    ASSERT_TRUE(cftest::eventually([&] { return told.load() >= 3; }));
    // A halted range is not retried: wake-ups and reads of a witness, with a
    // marker in the range each time, go by without a call.
    ASSERT_TRUE(cftest::witness_rounds(cluster(), table, 1000));
    p.stop();
    EXPECT_EQ(calls.load(), 2);
    const auto pm = of(metrics->snapshot(), table, "failing", "i1");
    ASSERT_EQ(pm.ranges.count(0), 1u);
    EXPECT_EQ(pm.ranges.at(0).errors.at(errc::handler_failed), 2);
    EXPECT_EQ(pm.ranges.at(0).errors.at(errc::halted), 1);
    EXPECT_EQ(pm.errors_of(errc::handler_failed), 2);
    EXPECT_EQ(pm.changes(), 0);
    EXPECT_EQ(told.load(), 3);  // on_error was told each as well

    const auto errors = log.of(LogEvent::error);
    ASSERT_EQ(errors.size(), 2u);
    for (const auto& r : errors) {
        EXPECT_EQ(r.code, errc::handler_failed);
        EXPECT_EQ(r.level, changefeed::LogLevel::error);
        EXPECT_EQ(r.ranges, std::vector<int>{0});
        EXPECT_NE(r.message.find("projection store unavailable"), std::string::npos) << r.message;
        EXPECT_EQ(r.table, table);
        EXPECT_EQ(r.processor, "failing");
        EXPECT_EQ(r.instance, "i1");
    }
    EXPECT_TRUE(errors[0].runbook.empty());
    EXPECT_NE(errors[1].runbook.find("handler-failing"), std::string::npos) << errors[1].runbook;
    const auto halted = log.of(LogEvent::halted);
    ASSERT_EQ(halted.size(), 1u);
    EXPECT_EQ(halted[0].code, errc::halted);
    EXPECT_EQ(halted[0].runbook, errors[1].runbook);
    const std::string line = changefeed::to_logfmt(halted[0]);
    EXPECT_NE(line.find(" event=halted "), std::string::npos) << line;
    EXPECT_NE(line.find(" code=halted "), std::string::npos) << line;
    EXPECT_NE(line.find(" runbook=" + halted[0].runbook), std::string::npos) << line;
}

TEST(Metrics, LeasesAcquiredLostAndReleasedAsASecondInstanceJoinsAndLeaves) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 4);
    auto metrics = std::make_shared<changefeed::InProcessMetrics>();
    LogBook log_a, log_b;
    changefeed::LatestVersionOptions oa = steady_options("a");
    oa.metrics = metrics;
    oa.log = log_a.sink();
    changefeed::LatestVersionOptions ob = steady_options("b");
    ob.metrics = metrics;
    ob.log = log_b.sink();
    auto a = changefeed::make_processor(coll(table), "shared", cftest::noop_handler(), oa);
    a.start();
    ASSERT_TRUE(cftest::wait_running(a, 4));
    {
        auto b = changefeed::make_processor(coll(table), "shared", cftest::noop_handler(), ob);
        b.start();
        // Balanced two and two: b took two of a's leases, a lost them.
        ASSERT_TRUE(cftest::eventually([&] {
            const auto s = metrics->snapshot();
            return of(s, table, "shared", "a").leases_held() == 2 && of(s, table, "shared", "b").leases_held() == 2;
        }));
        const auto s = metrics->snapshot();
        EXPECT_EQ(of(s, table, "shared", "a").lease_acquisitions(), 4);
        EXPECT_EQ(of(s, table, "shared", "a").lease_losses(), 2);
        EXPECT_EQ(of(s, table, "shared", "b").lease_acquisitions(), 2);
        EXPECT_EQ(of(s, table, "shared", "b").lease_losses(), 0);
        auto b_ranges = b.owned_ranges();
        std::sort(b_ranges.begin(), b_ranges.end());
        EXPECT_EQ(log_a.ranges_of(LogEvent::leases_lost), b_ranges);
        EXPECT_EQ(log_b.ranges_of(LogEvent::leases_acquired), b_ranges);
        for (const auto& r : log_a.of(LogEvent::leases_lost)) EXPECT_EQ(r.level, changefeed::LogLevel::warn);
    }
    // b stopped: it released its two, and a takes them back.
    ASSERT_TRUE(cftest::eventually([&] { return of(metrics->snapshot(), table, "shared", "a").leases_held() == 4; }));
    const auto s = metrics->snapshot();
    EXPECT_EQ(of(s, table, "shared", "b").lease_releases(), 2);
    EXPECT_EQ(of(s, table, "shared", "b").leases_held(), 0);
    EXPECT_EQ(of(s, table, "shared", "a").lease_acquisitions(), 6);
    EXPECT_EQ(log_b.ranges_of(LogEvent::leases_released).size(), 2u);
    a.stop();
    EXPECT_EQ(of(metrics->snapshot(), table, "shared", "a").lease_releases(), 4);
}

TEST(Metrics, ReconnectsOfEachConnectionAreCountedAndLogged) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 2);
    cftest::create_login_role(cluster(), "mt_reconnect_svc", {"changefeed_processor"});
    cluster().exec("GRANT SELECT ON " + table + " TO mt_reconnect_svc");
    auto metrics = std::make_shared<changefeed::InProcessMetrics>();
    LogBook log;
    cftest::Recorder rec;
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.metrics = metrics;
    o.log = log.sink();
    // Woken by LISTEN rather than by its long poll: all three connections a
    // processor may have.
    o.long_poll = false;
    auto p = changefeed::make_processor({cluster().conninfo_as("mt_reconnect_svc"), table}, "reconnecting",
                                        rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    (void)cftest::eventually([&] {
        return cluster()
                   .exec("SELECT count(*) FROM pg_stat_activity WHERE usename = 'mt_reconnect_svc'")[0][0]
                   .as<int>() >= 3;
    });
    // The server ends every session of the service: worker, lease thread, listener.
    cluster().exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'mt_reconnect_svc'");
    ASSERT_TRUE(cftest::eventually([&] {
        const auto pm = of(metrics->snapshot(), table, "reconnecting", "i1");
        for (auto role : {changefeed::ConnectionRole::worker, changefeed::ConnectionRole::leases,
                          changefeed::ConnectionRole::listener})
            if (!pm.reconnects.count(role)) return false;
        return true;
    }));
    // And it reads on.
    insert_rows(table, 1, 5);
    ASSERT_TRUE(cftest::eventually([&] { return rec.size() >= 5; }));
    p.stop();
    std::set<std::string> lost, back;
    for (const auto& r : log.of(LogEvent::connection_lost)) {
        lost.insert(r.connection);
        EXPECT_EQ(r.code, errc::connection_failed);
        EXPECT_EQ(r.level, changefeed::LogLevel::warn);
    }
    for (const auto& r : log.of(LogEvent::reconnected)) back.insert(r.connection);
    EXPECT_EQ(lost, (std::set<std::string>{"worker", "leases", "listener"}));
    EXPECT_EQ(back, lost);
    // Each reconnect was preceded by its loss: at most one loss per reconnect logged (once per outage).
    const auto pm = of(metrics->snapshot(), table, "reconnecting", "i1");
    EXPECT_EQ(static_cast<std::int64_t>(log.of(LogEvent::reconnected).size()), pm.reconnects_total());
    EXPECT_EQ(log.of(LogEvent::connection_lost).size(), log.of(LogEvent::reconnected).size());
}

TEST(Metrics, DuplicatesAProjectorSkippedAreCounted) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 1);
    auto metrics = std::make_shared<changefeed::InProcessMetrics>();
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.metrics = metrics;
    o.log = [](const LogRecord&) {};
    auto p = changefeed::make_processor(
        coll(table), "projecting", changefeed::Projector([](const changefeed::Change& c, const changefeed::Context&) {
            return std::stoi(c.doc_id) % 2 == 0 ? changefeed::ProjectionResult::skipped_duplicate
                                                : changefeed::ProjectionResult::applied;
        }),
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 1));
    insert_rows(table, 1, 10);
    ASSERT_TRUE(cftest::eventually([&] { return of(metrics->snapshot(), table, "projecting", "i1").changes() >= 10; }));
    p.stop();
    const auto pm = of(metrics->snapshot(), table, "projecting", "i1");
    EXPECT_EQ(pm.changes(), 10);
    EXPECT_EQ(pm.duplicates_skipped(), 5);
    EXPECT_EQ(pm.duplicates_skipped(), p.projection_stats().skipped_duplicate);
}

TEST(Logs, TheSinkReceivesTheLifecycleInOrder) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 3);
    LogBook log;
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.log = log.sink();
    {
        auto p = changefeed::make_processor(coll(table), "logged", cftest::noop_handler(), o);
        p.start();
        ASSERT_TRUE(cftest::wait_running(p, 3));
    }
    const auto all = log.all();
    ASSERT_GE(all.size(), 4u);
    EXPECT_EQ(all.front().event, LogEvent::started);
    EXPECT_EQ(all.back().event, LogEvent::stopped);
    EXPECT_EQ(log.ranges_of(LogEvent::leases_acquired), (std::vector<int>{0, 1, 2}));
    EXPECT_EQ(log.ranges_of(LogEvent::leases_released), (std::vector<int>{0, 1, 2}));
    EXPECT_TRUE(log.of(LogEvent::error).empty());
    for (const auto& r : all) {
        EXPECT_EQ(r.table, table);
        EXPECT_EQ(r.processor, "logged");
        EXPECT_EQ(r.instance, "i1");
        EXPECT_LE(std::chrono::system_clock::now() - r.time, 60s);
    }
}

TEST(Logs, ByDefaultEachEventIsOneLogfmtLineOnStderr) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 1);
    changefeed::LatestVersionOptions o = steady_options("i1");
    testing::internal::CaptureStderr();
    {
        auto p = changefeed::make_processor(coll(table), "plain", cftest::noop_handler(), o);
        p.start();
        cftest::wait_running(p, 1);
    }
    const std::string err = testing::internal::GetCapturedStderr();
    const std::string who = " table=" + table + " processor=plain instance=i1";
    EXPECT_TRUE(std::regex_search(err,
                                  std::regex("(^|\n)changefeed: ts=\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z "
                                             "level=info event=started" +
                                             who + "\n")))
        << err;
    EXPECT_NE(err.find("level=info event=leases_acquired" + who + " ranges=0\n"), std::string::npos) << err;
    EXPECT_NE(err.find("level=info event=leases_released" + who + " ranges=0\n"), std::string::npos) << err;
    EXPECT_NE(err.find("level=info event=stopped" + who + "\n"), std::string::npos) << err;
}

TEST(Logs, LogfmtQuotesWhatNeedsIt) {
    LogRecord r;
    r.time = std::chrono::system_clock::time_point(std::chrono::milliseconds(1764500523123));
    r.level = changefeed::LogLevel::error;
    r.event = LogEvent::error;
    r.table = "public.orders";
    r.processor = "tenant a/billing";
    r.ranges = {3, 5};
    r.code = changefeed::make_error_code(errc::handler_failed);
    r.message = "handler failed: \"x\" = 1\nnext line\\";
    EXPECT_EQ(changefeed::to_logfmt(r),
              "changefeed: ts=2025-11-30T11:02:03.123Z level=error event=error table=public.orders "
              "processor=\"tenant a/billing\" ranges=3,5 code=handler_failed "
              "msg=\"handler failed: \\\"x\\\" = 1\\nnext line\\\\\"");
}

// A publisher that fails its first call.
class FlakyPublisher : public changefeed::Publisher {
public:
    void publish(const std::vector<changefeed::Envelope>& envelopes) override {
        if (calls_++ == 0) throw changefeed::Error(errc::publish_failed, "broker away");
        published_ += static_cast<int>(envelopes.size());
    }
    int published() const { return published_; }

private:
    std::atomic<int> calls_{0}, published_{0};
};

TEST(Metrics, ABridgeCountsWhatItPublishedAndItsPublisherFailures) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 1);
    auto metrics = std::make_shared<changefeed::InProcessMetrics>();
    LogBook log;
    FlakyPublisher publisher;
    changefeed::BridgeOptions o(cftest::common_options(steady_options("i1")));
    o.metrics = metrics;
    o.log = log.sink();
    o.publish_retry_min = 20ms;
    o.publish_retry_max = 40ms;
    changefeed::Bridge bridge(coll(table), "bridged", changefeed::cloudevents_mapper(), publisher, o);
    bridge.start();
    ASSERT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
    insert_rows(table, 1, 4);
    ASSERT_TRUE(cftest::eventually([&] { return of(metrics->snapshot(), table, "bridged", "i1").changes() >= 4; }));
    bridge.stop();
    const auto pm = of(metrics->snapshot(), table, "bridged", "i1");
    EXPECT_EQ(pm.changes(), 4);
    EXPECT_EQ(publisher.published(), 4);
    EXPECT_EQ(pm.errors_of(errc::publish_failed), 1);
    ASSERT_EQ(log.of(LogEvent::error).size(), 1u);
    EXPECT_EQ(log.of(LogEvent::error)[0].code, errc::publish_failed);
    EXPECT_EQ(log.of(LogEvent::error)[0].processor, "bridged");
}

// A query of docs/prometheus/queries.yaml: the "query: |" block under `name`,
// and the columns its metrics list as labels.
struct ExporterQuery {
    std::string sql;
    std::set<std::string> labels;
};
ExporterQuery exporter_query(const std::string& name = "changefeed_processor") {
    std::ifstream in(std::string(CF_SOURCE_DIR) + "/docs/prometheus/queries.yaml");
    ExporterQuery q;
    std::string line, column;
    enum { before, seen, in_query, in_metrics } at = before;
    while (std::getline(in, line)) {
        if (at == before) {
            if (line == name + ":") at = seen;
        } else if (at == seen) {
            if (line.find("query: |") != std::string::npos) at = in_query;
        } else if (at == in_query) {
            if (line.rfind("    ", 0) == 0) q.sql += line + "\n";
            else if (line.find("metrics:") != std::string::npos) at = in_metrics;
        } else {
            if (!line.empty() && line[0] != ' ') break;  // the next query
            if (line.rfind("    - ", 0) == 0) column = line.substr(6, line.find(':') - 6);
            if (line.find("usage: \"LABEL\"") != std::string::npos) q.labels.insert(column);
        }
    }
    return q;
}

// postgres_exporter's query, as a monitoring role (changefeed_reader and
// pg_monitor), sees a processor it does not own, with its estimate.
TEST(StatusView, TheExporterQueryRunsAsAMonitoringRole) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 2);
    cftest::create_login_role(cluster(), "mt_exporter", {"changefeed_reader", "pg_monitor"});
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.log = [](const LogRecord&) {};
    auto p = changefeed::make_processor(
        coll(table), "watched",
        [](const std::vector<changefeed::Change>&, const changefeed::Context&) { throw std::runtime_error("stuck"); },
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    insert_rows(table, 1, 10);
    const std::string sql = exporter_query().sql;
    ASSERT_NE(sql.find("changefeed.processor_status"), std::string::npos) << sql;
    const std::string owners = exporter_query("changefeed_lease_owner").sql;
    ASSERT_NE(owners.find("changefeed.processor_status"), std::string::npos) << owners;
    pqxx::connection c(cluster().conninfo_as("mt_exporter"));
    pqxx::work tx(c);
    const auto r = tx.exec("SELECT q.range, o.instance, q.live, q.pending_estimate, q.lag_seconds >= 0, q.history_lost"
                           "  FROM (" +
                           sql + ") q LEFT JOIN (" + owners +
                           ") o USING (\"table\", processor, range)"
                           " WHERE \"table\" = 'public." +
                           table + "' AND processor = 'watched' ORDER BY range");
    ASSERT_EQ(r.size(), 2u);
    std::int64_t pending = 0;
    for (const auto& row : r) {
        EXPECT_EQ(row[1].as<std::string>(), "i1");
        EXPECT_EQ(row[2].as<int>(), 1);
        pending += row[3].as<std::int64_t>();
        EXPECT_TRUE(row[4].as<bool>());
        EXPECT_EQ(row[5].as<int>(), 0);
    }
    EXPECT_EQ(pending, 10);  // the handler never returns: all ten wait
    p.stop();
}

#ifdef CF_WITH_PROMETHEUS
// GET /metrics over a plain socket; the body.
std::string http_get(int port, const std::string& path) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        ADD_FAILURE() << "cannot connect to port " << port;
        return {};
    }
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    (void)::write(fd, request.data(), request.size());
    std::string response;
    char buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) response.append(buf, static_cast<std::size_t>(n));
    ::close(fd);
    EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response.substr(0, 200);
    const auto body = response.find("\r\n\r\n");
    return body == std::string::npos ? std::string() : response.substr(body + 4);
}

// The sum of the values of `name`'s series that carry every label of `labels`.
double sum_of(const std::string& body, const std::string& name, const std::vector<std::string>& labels) {
    double sum = 0;
    std::istringstream in(body);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(name + "{", 0) != 0) continue;
        const auto close = line.find('}');
        const std::string set = line.substr(name.size() + 1, close - name.size() - 1);
        bool all = true;
        for (const auto& l : labels) all &= set.find(l) != std::string::npos;
        if (all) sum += std::stod(line.substr(close + 2));
    }
    return sum;
}

TEST(Prometheus, TheExpositionScrapedOverHttpHasTheSeries) {
    const auto table = cftest::test_table("mt");
    cftest::create_table(cluster(), table, 2);
    auto metrics = std::make_shared<changefeed::PrometheusMetrics>();
    metrics->serve("127.0.0.1:0");
    ASSERT_GT(metrics->port(), 0);
    EXPECT_EQ(cftest::code_of([&] { metrics->serve("127.0.0.1:0"); }), errc::invalid_option);
    std::atomic<int> calls{0};
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.metrics = metrics;
    o.log = [](const LogRecord&) {};
    auto p = changefeed::make_processor(
        coll(table), "scraped",
        [&](const std::vector<changefeed::Change>&, const changefeed::Context&) {
            if (calls++ == 0) throw std::runtime_error("first call fails");
        },
        o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    insert_rows(table, 1, 20);
    const std::vector<std::string> mine{"table=\"public." + table + "\"", "processor=\"scraped\""};
    std::string body;
    ASSERT_TRUE(cftest::eventually([&] {
        body = http_get(metrics->port(), "/metrics");
        return sum_of(body, "changefeed_changes_delivered_total", mine) == 20;
    })) << body;
    EXPECT_EQ(sum_of(body, "changefeed_leases_held", mine), 2);
    EXPECT_EQ(sum_of(body, "changefeed_lease_acquisitions_total", mine), 2);
    auto with_code = mine;
    with_code.push_back("code=\"handler_failed\"");
    EXPECT_EQ(sum_of(body, "changefeed_errors_total", with_code), 1);
    EXPECT_EQ(sum_of(body, "changefeed_batches_delivered_total", mine),
              sum_of(body, "changefeed_handler_seconds_count", mine));
    EXPECT_GE(sum_of(body, "changefeed_batches_delivered_total", mine), 1);
    for (const char* series :
         {"# TYPE changefeed_handler_seconds histogram", "changefeed_handler_seconds_bucket{", "le=\"0.001\"",
          "le=\"+Inf\"", "# TYPE changefeed_lag_seconds gauge", "changefeed_lag_seconds{", "range=\"0\"", "range=\"1\"",
          "# TYPE changefeed_changes_delivered_total counter"})
        EXPECT_NE(body.find(series), std::string::npos) << series << "\n" << body;
    EXPECT_NE(metrics->exposition().find("changefeed_changes_delivered_total{"), std::string::npos);
    p.stop();
    body = http_get(metrics->port(), "/metrics");
    EXPECT_EQ(sum_of(body, "changefeed_leases_held", mine), 0);
    EXPECT_EQ(sum_of(body, "changefeed_lease_releases_total", mine), 2);
    EXPECT_EQ(body.find("changefeed_lag_seconds{"), std::string::npos) << "lag series go with the leases\n" << body;
}

// One series of an exposition: its labels and value.
struct Series {
    std::map<std::string, std::string> labels;
    double value = 0;
};
std::vector<Series> series_of(const std::string& body, const std::string& name) {
    std::vector<Series> out;
    std::istringstream in(body);
    const std::regex label(R"re(([a-z_]+)="([^"]*)")re");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind(name + "{", 0) != 0) continue;
        const auto close = line.find('}');
        const std::string set = line.substr(name.size() + 1, close - name.size() - 1);
        Series one;
        for (std::sregex_iterator it(set.begin(), set.end(), label), end; it != end; ++it)
            one.labels[(*it)[1]] = (*it)[2];
        one.value = std::stod(line.substr(close + 2));
        out.push_back(std::move(one));
    }
    return out;
}

// The client's /metrics and queries.yaml as a monitoring role sees it share
// one vocabulary: table (schema.table, though the processor was given the
// table without its schema and "public" is on the role's search_path),
// processor, range; the instance only on the info series; counters at 0
// before their first event.
TEST(Prometheus, TheClientsSeriesJoinTheExportersOnTableProcessorAndRange) {
    const auto table = cftest::test_table("mj");
    cftest::create_table(cluster(), table, 3);
    cftest::create_login_role(cluster(), "mj_monitor", {"changefeed_reader", "pg_monitor"});
    cluster().exec("ALTER ROLE mj_monitor SET search_path = \"$user\", public");
    auto metrics = std::make_shared<changefeed::PrometheusMetrics>();
    metrics->serve("127.0.0.1:0");
    changefeed::LatestVersionOptions o = steady_options("i1");
    o.metrics = metrics;
    o.log = [](const LogRecord&) {};
    auto p = changefeed::make_processor(coll(table), "joined", cftest::noop_handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 3));
    const std::string qualified = "public." + table;
    const auto mine = [&](const Series& x) {
        return x.labels.count("table") && x.labels.at("table") == qualified && x.labels.at("processor") == "joined";
    };
    std::string body;
    std::vector<Series> acquired;
    ASSERT_TRUE(cftest::eventually([&] {
        body = http_get(metrics->port(), "/metrics");
        acquired.clear();
        for (auto& x : series_of(body, "changefeed_lease_acquisitions_total"))
            if (mine(x) && x.value == 1) acquired.push_back(x);
        return acquired.size() == 3;
    })) << body;

    // Counters exist before their first event, at 0.
    for (const char* name : {"changefeed_errors_total", "changefeed_reconnects_total", "changefeed_lease_losses_total",
                             "changefeed_changes_delivered_total"}) {
        int present = 0;
        for (const auto& x : series_of(body, name))
            if (mine(x)) {
                ++present;
                EXPECT_EQ(x.value, 0) << name;
            }
        EXPECT_GT(present, 0) << name << " has no series before its first event\n" << body;
    }
    bool handler_failed = false;
    for (const auto& x : series_of(body, "changefeed_errors_total"))
        handler_failed |= mine(x) && x.labels.at("code") == "handler_failed";
    EXPECT_TRUE(handler_failed) << body;
    // The instance is a label of the info series only.
    std::vector<Series> info;
    for (auto& x : series_of(body, "changefeed_instance_info"))
        if (mine(x)) info.push_back(x);
    ASSERT_EQ(info.size(), 1u) << body;
    EXPECT_EQ(info[0].labels.at("instance"), "i1");
    EXPECT_EQ(info[0].value, 1);
    {
        std::istringstream in(body);
        for (std::string line; std::getline(in, line);)
            if (line.find("instance=\"") != std::string::npos)
                EXPECT_EQ(line.rfind("changefeed_instance_info{", 0), 0u) << "the instance labels " << line;
    }
    std::set<std::string> client_labels;
    for (const auto& x : acquired)
        for (const auto& [k, v] : x.labels) client_labels.insert(k);
    EXPECT_EQ(client_labels, (std::set<std::string>{"table", "processor", "range"}));

    // The exporter's queries as the monitoring role: the same labels, and every
    // range's row finds the client's series with the same label values.
    const auto ranges = exporter_query("changefeed_processor");
    const auto owners = exporter_query("changefeed_lease_owner");
    EXPECT_EQ(ranges.labels, client_labels);
    EXPECT_EQ(owners.labels, (std::set<std::string>{"table", "processor", "range", "instance"}));
    pqxx::connection c(cluster().conninfo_as("mj_monitor"));
    pqxx::work tx(c);
    EXPECT_EQ(tx.exec("SELECT '" + table + "'::regclass::text")[0][0].as<std::string>(), table)
        << "the regclass text would not join";
    const auto rows = tx.exec("SELECT q.\"table\", q.processor, q.range, q.live, o.instance FROM (" + ranges.sql +
                              ") q LEFT JOIN (" + owners.sql +
                              ") o USING (\"table\", processor, range)"
                              " WHERE q.processor = 'joined'");
    ASSERT_EQ(rows.size(), 3u);
    std::set<std::string> joined;
    for (const auto& row : rows) {
        const std::map<std::string, std::string> key{{"table", row[0].as<std::string>()},
                                                     {"processor", row[1].as<std::string>()},
                                                     {"range", row[2].as<std::string>()}};
        EXPECT_EQ(row[3].as<int>(), 1);
        for (const auto& x : acquired)
            if (x.labels == key) joined.insert(key.at("range"));
        // The lease owner's info joins the client's instance info on table and processor.
        EXPECT_EQ(row[4].as<std::string>(), info[0].labels.at("instance"));
    }
    EXPECT_EQ(joined, (std::set<std::string>{"0", "1", "2"}));
    tx.commit();

    p.stop();
    body = http_get(metrics->port(), "/metrics");
    EXPECT_EQ(body.find("changefeed_instance_info{"), std::string::npos) << "a stopped instance is gone\n" << body;
}
#endif

}  // namespace
