// Measurements of processors: what they delivered, how long handlers took,
// how far behind each range is, leases, errors, reconnects.
//
//   auto metrics = std::make_shared<changefeed::InProcessMetrics>();
//   changefeed::LatestVersionOptions o;
//   o.metrics = metrics;                       // null (the default): nothing is measured
//   ...
//   auto s = metrics->snapshot();
//   s.at({"public.orders", "billing", p.instance_name()}).changes();
//
// PostgreSQL processors and bridges report here; the in-memory provider
// measures nothing (its failures still reach ProcessorOptions::log).
// A Prometheus exposition of the same measurements is the separate library
// changefeed::prometheus (changefeed/prometheus_metrics.hpp).
#pragma once

#include <changefeed/error.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace changefeed {

// Whose measurement: one instance of one processor.
struct MetricScope {
    std::string table;      // the collection's table, "schema.table" as the catalog names it
    std::string processor;  // the name on the server: stored_processor_name(name, tenant)
    std::string instance;   // this instance's name

    friend bool operator<(const MetricScope& a, const MetricScope& b) {
        return std::tie(a.table, a.processor, a.instance) < std::tie(b.table, b.processor, b.instance);
    }
    friend bool operator==(const MetricScope& a, const MetricScope& b) = default;
};

// The three connections of a processor (each reconnects on its own).
enum class ConnectionRole {
    worker,    // reads, calls the handler, stores checkpoints
    leases,    // acquires, renews and releases the leases
    listener,  // LISTENs for wake-ups
};

const char* to_string(ConnectionRole role) noexcept;

// Receives a processor's measurements.  Set through ProcessorOptions::metrics;
// one object may serve many processors (MetricScope tells them apart).  Calls
// come from the processors' threads, concurrently: an implementation is
// thread-safe and quick, and what it throws is dropped.  Every method does
// nothing by default, so an implementation overrides what it records.
class Metrics {
public:
    virtual ~Metrics() = default;

    // A batch (a log batch or a backfill page) whose handler returned:
    // `changes` changes handed over (duplicates a projector skipped included),
    // `handler_time` spent in the handler (a projector's calls, a
    // transactional handler before its commit).
    virtual void batch_delivered(const MetricScope&, int /*range*/, std::int64_t /*changes*/,
                                 std::chrono::nanoseconds /*handler_time*/) {}
    // How far behind the range is, from what the reading thread knows without
    // asking the server: after a log batch, the age of its last change (this
    // machine's clock minus the change's written_at, at least zero); zero when
    // a read found nothing waiting.  Not told during a backfill.
    virtual void range_lag(const MetricScope&, int /*range*/, std::chrono::milliseconds /*lag*/) {}
    // A projector skipped `count` changes of a batch as duplicates (recorded in
    // the deduplication store, or ProjectionResult::skipped_duplicate).
    virtual void duplicates_skipped(const MetricScope&, int /*range*/, std::int64_t /*count*/) {}
    // The instance took the range's lease (at start, a free or expired one, by balancing).
    virtual void lease_acquired(const MetricScope&, int /*range*/) {}
    // The lease was taken over by another instance or expired, without this instance giving it up.
    virtual void lease_lost(const MetricScope&, int /*range*/) {}
    // The instance gave the lease up (stop, halt).
    virtual void lease_released(const MetricScope&, int /*range*/) {}
    // A failure told to on_error (and the log), by code; `range` when it concerns one.
    virtual void error(const MetricScope&, std::optional<int> /*range*/, errc /*code*/) {}
    // A connection that was lost is back.
    virtual void reconnected(const MetricScope&, ConnectionRole /*role*/) {}
    // The processor started, its collection having `ranges` ranges: an
    // exposition creates its series here, so that counters read 0 before
    // their first event.
    virtual void started(const MetricScope&, int /*ranges*/) {}
    // The processor stopped (stop(), the destructor, or a halt).
    virtual void stopped(const MetricScope&) {}
};

// The overrides of an implementation that records every measurement of
// Metrics (InProcessMetrics, PrometheusMetrics): declared once, so that a
// measurement added to Metrics is one each of them must define.
#define CHANGEFEED_METRICS_OVERRIDES                                                             \
    void batch_delivered(const MetricScope& scope, int range, std::int64_t changes,              \
                         std::chrono::nanoseconds handler_time) override;                        \
    void range_lag(const MetricScope& scope, int range, std::chrono::milliseconds lag) override; \
    void duplicates_skipped(const MetricScope& scope, int range, std::int64_t count) override;   \
    void lease_acquired(const MetricScope& scope, int range) override;                           \
    void lease_lost(const MetricScope& scope, int range) override;                               \
    void lease_released(const MetricScope& scope, int range) override;                           \
    void error(const MetricScope& scope, std::optional<int> range, errc code) override;          \
    void reconnected(const MetricScope& scope, ConnectionRole role) override

// The handler-time histogram's upper bounds in seconds (the last bucket, above
// the largest bound, is open): 1 ms to 10 s.
const std::vector<double>& handler_time_buckets();

// A histogram as counted: counts[i] holds the observations <= bounds[i] and
// > bounds[i-1]; counts.back() those above every bound.
struct Histogram {
    std::vector<double> bounds;        // seconds
    std::vector<std::int64_t> counts;  // bounds.size() + 1 entries
    double sum = 0;                    // seconds
    std::int64_t count = 0;
};

// One range of one processor instance, as counted since the metrics object existed.
struct RangeMetrics {
    std::int64_t changes = 0;  // changes delivered
    std::int64_t batches = 0;  // batches delivered
    Histogram handler_time;
    std::optional<std::chrono::milliseconds> lag;  // the last range_lag(); none while not held
    std::int64_t duplicates_skipped = 0;
    bool lease_held = false;
    std::int64_t lease_acquisitions = 0;
    std::int64_t lease_losses = 0;
    std::int64_t lease_releases = 0;
    std::map<errc, std::int64_t> errors;  // failures concerning this range
};

// One processor instance.
struct ProcessorMetrics {
    std::map<int, RangeMetrics> ranges;
    std::map<errc, std::int64_t> errors;  // failures concerning no single range
    std::map<ConnectionRole, std::int64_t> reconnects;

    // Sums over the ranges (errors: of the ranges and the processor's own).
    std::int64_t changes() const;
    std::int64_t batches() const;
    int leases_held() const;
    std::int64_t lease_acquisitions() const;
    std::int64_t lease_losses() const;
    std::int64_t lease_releases() const;
    std::int64_t duplicates_skipped() const;
    std::int64_t errors_of(errc code) const;
    std::int64_t reconnects_total() const;
};

using MetricsSnapshot = std::map<MetricScope, ProcessorMetrics>;

// Counts in memory; snapshot() copies what was counted so far.
class InProcessMetrics final : public Metrics {
public:
    MetricsSnapshot snapshot() const;

    CHANGEFEED_METRICS_OVERRIDES;

private:
    RangeMetrics& range_of(const MetricScope& scope, int range);  // with mu_ held

    mutable std::mutex mu_;
    MetricsSnapshot counted_;
};

}  // namespace changefeed
