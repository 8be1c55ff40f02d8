// PrometheusMetrics: the Metrics calls as prometheus-cpp families, and an
// Exposer (civetweb) serving them.
#include <changefeed/prometheus_metrics.hpp>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <mutex>

namespace changefeed {

struct PrometheusMetrics::Impl {
    explicit Impl(std::shared_ptr<prometheus::Registry> r)
        : registry(r ? std::move(r) : std::make_shared<prometheus::Registry>()),
          changes(prometheus::BuildCounter()
                      .Name("changefeed_changes_delivered_total")
                      .Help("Changes handed to the handler whose call returned")
                      .Register(*registry)),
          batches(prometheus::BuildCounter()
                      .Name("changefeed_batches_delivered_total")
                      .Help("Batches (log batches and backfill pages) whose handler returned")
                      .Register(*registry)),
          handler_seconds(prometheus::BuildHistogram()
                              .Name("changefeed_handler_seconds")
                              .Help("Time spent in the handler per delivered batch")
                              .Register(*registry)),
          lag(prometheus::BuildGauge()
                  .Name("changefeed_lag_seconds")
                  .Help("Age of the last change delivered from the range (0 when a read found nothing waiting)")
                  .Register(*registry)),
          duplicates(prometheus::BuildCounter()
                         .Name("changefeed_duplicates_skipped_total")
                         .Help("Changes a projector skipped as duplicates")
                         .Register(*registry)),
          leases_held(prometheus::BuildGauge()
                          .Name("changefeed_leases_held")
                          .Help("Leases this process holds")
                          .Register(*registry)),
          acquisitions(prometheus::BuildCounter()
                           .Name("changefeed_lease_acquisitions_total")
                           .Help("Leases taken")
                           .Register(*registry)),
          losses(prometheus::BuildCounter()
                     .Name("changefeed_lease_losses_total")
                     .Help("Leases taken over by another instance or expired")
                     .Register(*registry)),
          releases(prometheus::BuildCounter()
                       .Name("changefeed_lease_releases_total")
                       .Help("Leases given up (stop, halt)")
                       .Register(*registry)),
          errors(prometheus::BuildCounter()
                     .Name("changefeed_errors_total")
                     .Help("Failures told to on_error, by code")
                     .Register(*registry)),
          reconnects(prometheus::BuildCounter()
                         .Name("changefeed_reconnects_total")
                         .Help("Connections re-established after they were lost")
                         .Register(*registry)),
          instance_info(prometheus::BuildGauge()
                            .Name("changefeed_instance_info")
                            .Help("1 while this instance of the processor runs (the instance name as a label)")
                            .Register(*registry)) {}

    prometheus::Histogram& handler_histogram(const prometheus::Labels& labels) {
        return handler_seconds.Add(labels, prometheus::Histogram::BucketBoundaries(handler_time_buckets().begin(),
                                                                                   handler_time_buckets().end()));
    }

    static prometheus::Labels of(const MetricScope& s) { return {{"table", s.table}, {"processor", s.processor}}; }
    static prometheus::Labels of(const MetricScope& s, int range) {
        return {{"table", s.table}, {"processor", s.processor}, {"range", std::to_string(range)}};
    }

    // The lease is gone: so is the range's lag, which another instance reports now.
    void forget_lag(const MetricScope& s, int range) {
        const auto labels = of(s, range);
        if (lag.Has(labels)) lag.Remove(&lag.Add(labels));
    }

    std::shared_ptr<prometheus::Registry> registry;
    prometheus::Family<prometheus::Counter>& changes;
    prometheus::Family<prometheus::Counter>& batches;
    prometheus::Family<prometheus::Histogram>& handler_seconds;
    prometheus::Family<prometheus::Gauge>& lag;
    prometheus::Family<prometheus::Counter>& duplicates;
    prometheus::Family<prometheus::Gauge>& leases_held;
    prometheus::Family<prometheus::Counter>& acquisitions;
    prometheus::Family<prometheus::Counter>& losses;
    prometheus::Family<prometheus::Counter>& releases;
    prometheus::Family<prometheus::Counter>& errors;
    prometheus::Family<prometheus::Counter>& reconnects;
    prometheus::Family<prometheus::Gauge>& instance_info;

    std::mutex mu;  // guards exposer and the lag series' removal
    std::unique_ptr<prometheus::Exposer> exposer;
};

PrometheusMetrics::PrometheusMetrics(std::shared_ptr<prometheus::Registry> registry)
    : impl_(std::make_unique<Impl>(std::move(registry))) {}

PrometheusMetrics::~PrometheusMetrics() = default;

void PrometheusMetrics::serve(const std::string& address) {
    std::lock_guard lock(impl_->mu);
    if (impl_->exposer) throw Error(errc::invalid_option, "the metrics are served already");
    try {
        auto exposer = std::make_unique<prometheus::Exposer>(address);
        exposer->RegisterCollectable(impl_->registry);
        impl_->exposer = std::move(exposer);
    } catch (const std::exception& e) {
        throw Error(errc::invalid_option, "cannot serve metrics on \"" + address + "\": " + e.what());
    }
}

int PrometheusMetrics::port() const {
    std::lock_guard lock(impl_->mu);
    if (!impl_->exposer) return 0;
    const auto ports = impl_->exposer->GetListeningPorts();
    return ports.empty() ? 0 : ports.front();
}

std::string PrometheusMetrics::exposition() const {
    return prometheus::TextSerializer().Serialize(impl_->registry->Collect());
}

std::shared_ptr<prometheus::Registry> PrometheusMetrics::registry() const { return impl_->registry; }

void PrometheusMetrics::batch_delivered(const MetricScope& scope, int range, std::int64_t changes,
                                        std::chrono::nanoseconds handler_time) {
    const auto labels = Impl::of(scope, range);
    impl_->changes.Add(labels).Increment(static_cast<double>(changes));
    impl_->batches.Add(labels).Increment();
    impl_->handler_histogram(labels).Observe(std::chrono::duration<double>(handler_time).count());
}

void PrometheusMetrics::range_lag(const MetricScope& scope, int range, std::chrono::milliseconds lag) {
    std::lock_guard lock(impl_->mu);
    impl_->lag.Add(Impl::of(scope, range)).Set(std::chrono::duration<double>(lag).count());
}

void PrometheusMetrics::duplicates_skipped(const MetricScope& scope, int range, std::int64_t count) {
    impl_->duplicates.Add(Impl::of(scope, range)).Increment(static_cast<double>(count));
}

void PrometheusMetrics::lease_acquired(const MetricScope& scope, int range) {
    impl_->acquisitions.Add(Impl::of(scope, range)).Increment();
    impl_->leases_held.Add(Impl::of(scope)).Increment();
}

void PrometheusMetrics::lease_lost(const MetricScope& scope, int range) {
    impl_->losses.Add(Impl::of(scope, range)).Increment();
    impl_->leases_held.Add(Impl::of(scope)).Decrement();
    std::lock_guard lock(impl_->mu);
    impl_->forget_lag(scope, range);
}

void PrometheusMetrics::lease_released(const MetricScope& scope, int range) {
    impl_->releases.Add(Impl::of(scope, range)).Increment();
    impl_->leases_held.Add(Impl::of(scope)).Decrement();
    std::lock_guard lock(impl_->mu);
    impl_->forget_lag(scope, range);
}

void PrometheusMetrics::error(const MetricScope& scope, std::optional<int>, errc code) {
    auto labels = Impl::of(scope);
    labels.emplace("code", to_string(code));
    impl_->errors.Add(labels).Increment();
}

void PrometheusMetrics::reconnected(const MetricScope& scope, ConnectionRole role) {
    auto labels = Impl::of(scope);
    labels.emplace("connection", to_string(role));
    impl_->reconnects.Add(labels).Increment();
}

namespace {

// The codes a running processor tells on_error: their series exist from the
// start, so that an alert on one sees 0 rather than no data.
constexpr errc run_time_codes[] = {
    errc::malformed_position,    errc::foreign_position,
    errc::history_lost,          errc::lease_lost,
    errc::handler_failed,        errc::connection_failed,
    errc::database_error,        errc::permission_denied,
    errc::duplicates_rising,     errc::halted,
    errc::publish_failed,        errc::read_only_server,
    errc::position_not_replayed, errc::other_history,
    errc::images_not_logged,
};

}  // namespace

void PrometheusMetrics::started(const MetricScope& scope, int ranges) {
    for (int range = 0; range < ranges; ++range) {
        const auto labels = Impl::of(scope, range);
        impl_->changes.Add(labels);
        impl_->batches.Add(labels);
        impl_->handler_histogram(labels);
        impl_->duplicates.Add(labels);
        impl_->acquisitions.Add(labels);
        impl_->losses.Add(labels);
        impl_->releases.Add(labels);
    }
    impl_->leases_held.Add(Impl::of(scope));
    for (const errc code : run_time_codes) {
        auto labels = Impl::of(scope);
        labels.emplace("code", to_string(code));
        impl_->errors.Add(labels);
    }
    for (const auto role : {ConnectionRole::worker, ConnectionRole::leases, ConnectionRole::listener}) {
        auto labels = Impl::of(scope);
        labels.emplace("connection", to_string(role));
        impl_->reconnects.Add(labels);
    }
    auto info = Impl::of(scope);
    info.emplace("instance", scope.instance);
    impl_->instance_info.Add(info).Set(1);
}

void PrometheusMetrics::stopped(const MetricScope& scope) {
    auto info = Impl::of(scope);
    info.emplace("instance", scope.instance);
    std::lock_guard lock(impl_->mu);
    if (impl_->instance_info.Has(info)) impl_->instance_info.Remove(&impl_->instance_info.Add(info));
}

}  // namespace changefeed
