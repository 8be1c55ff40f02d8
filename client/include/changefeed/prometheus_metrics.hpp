// Processor metrics as a Prometheus exposition: library changefeed::prometheus
// (built when prometheus-cpp is found; Debian: prometheus-cpp-dev).
//
//   auto metrics = std::make_shared<changefeed::PrometheusMetrics>();
//   metrics->serve();                        // GET /metrics on 127.0.0.1:9464
//   changefeed::LatestVersionOptions o;
//   o.metrics = metrics;
//
// The series (docs/operations.md lists them), labelled table and processor,
// and range where per range:
//   changefeed_changes_delivered_total, changefeed_batches_delivered_total,
//   changefeed_handler_seconds (histogram), changefeed_lag_seconds,
//   changefeed_duplicates_skipped_total, changefeed_leases_held,
//   changefeed_lease_acquisitions_total, changefeed_lease_losses_total,
//   changefeed_lease_releases_total, changefeed_errors_total{code},
//   changefeed_reconnects_total{connection}; and changefeed_instance_info
//   {table, processor, instance} 1 while the processor runs (the instance
//   name is on this series only, so restarts do not multiply the others).
// The table label is "schema.table" as the catalog names it, the vocabulary of
// docs/prometheus/queries.yaml.  Counters exist at 0 from the processor's start.
#pragma once

#include <changefeed/metrics.hpp>

#include <memory>
#include <string>

namespace prometheus {
class Registry;
}

namespace changefeed {

class PrometheusMetrics final : public Metrics {
public:
    // Registers the changefeed_* families in `registry` -- a service's own,
    // exposed as it likes -- or in a new one when null.
    explicit PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry = nullptr);
    ~PrometheusMetrics() override;
    PrometheusMetrics(const PrometheusMetrics&) = delete;
    PrometheusMetrics& operator=(const PrometheusMetrics&) = delete;

    // Serves the registry at GET /metrics on `address` ("host:port"; port 0
    // takes a free one) until this object is destroyed.  Throws
    // Error(invalid_option) when it cannot listen there, or serves already.
    // The default listens on the loopback interface only.  The endpoint has
    // no authentication and no TLS: anyone who can connect reads the table
    // and processor names, lag and error counts.  Listen on another
    // interface (e.g. "0.0.0.0:9464") only where the network already limits
    // who can connect, or put an authenticating proxy in front.
    void serve(const std::string& address = "127.0.0.1:9464");
    // The port serve() listens on; 0 before.
    int port() const;
    // The registry's text exposition now (what /metrics answers).
    std::string exposition() const;
    std::shared_ptr<prometheus::Registry> registry() const;

    CHANGEFEED_METRICS_OVERRIDES;
    void started(const MetricScope& scope, int ranges) override;
    void stopped(const MetricScope& scope) override;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace changefeed
