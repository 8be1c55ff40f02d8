// InProcessMetrics: the counts behind a mutex, copied out by snapshot().
#include <changefeed/metrics.hpp>

#include <algorithm>

namespace changefeed {

const char* to_string(ConnectionRole role) noexcept {
    switch (role) {
    case ConnectionRole::worker: return "worker";
    case ConnectionRole::leases: return "leases";
    case ConnectionRole::listener: return "listener";
    }
    return "unknown";
}

const std::vector<double>& handler_time_buckets() {
    static const std::vector<double> bounds{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                            0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
    return bounds;
}

namespace {

template <class F>
std::int64_t sum_ranges(const ProcessorMetrics& p, F&& f) {
    std::int64_t n = 0;
    for (const auto& [range, r] : p.ranges) n += f(r);
    return n;
}

}  // namespace

std::int64_t ProcessorMetrics::changes() const {
    return sum_ranges(*this, [](const RangeMetrics& r) { return r.changes; });
}
std::int64_t ProcessorMetrics::batches() const {
    return sum_ranges(*this, [](const RangeMetrics& r) { return r.batches; });
}
int ProcessorMetrics::leases_held() const {
    return static_cast<int>(sum_ranges(*this, [](const RangeMetrics& r) { return std::int64_t(r.lease_held); }));
}
std::int64_t ProcessorMetrics::lease_acquisitions() const {
    return sum_ranges(*this, [](const RangeMetrics& r) { return r.lease_acquisitions; });
}
std::int64_t ProcessorMetrics::lease_losses() const {
    return sum_ranges(*this, [](const RangeMetrics& r) { return r.lease_losses; });
}
std::int64_t ProcessorMetrics::lease_releases() const {
    return sum_ranges(*this, [](const RangeMetrics& r) { return r.lease_releases; });
}
std::int64_t ProcessorMetrics::duplicates_skipped() const {
    return sum_ranges(*this, [](const RangeMetrics& r) { return r.duplicates_skipped; });
}
std::int64_t ProcessorMetrics::errors_of(errc code) const {
    auto own = errors.find(code);
    std::int64_t n = own == errors.end() ? 0 : own->second;
    return n + sum_ranges(*this, [code](const RangeMetrics& r) {
               auto e = r.errors.find(code);
               return e == r.errors.end() ? std::int64_t(0) : e->second;
           });
}
std::int64_t ProcessorMetrics::reconnects_total() const {
    std::int64_t n = 0;
    for (const auto& [role, count] : reconnects) n += count;
    return n;
}

MetricsSnapshot InProcessMetrics::snapshot() const {
    std::lock_guard lock(mu_);
    return counted_;
}

RangeMetrics& InProcessMetrics::range_of(const MetricScope& scope, int range) {
    RangeMetrics& r = counted_[scope].ranges[range];
    if (r.handler_time.bounds.empty()) {
        r.handler_time.bounds = handler_time_buckets();
        r.handler_time.counts.assign(r.handler_time.bounds.size() + 1, 0);
    }
    return r;
}

void InProcessMetrics::batch_delivered(const MetricScope& scope, int range, std::int64_t changes,
                                       std::chrono::nanoseconds handler_time) {
    const double seconds = std::chrono::duration<double>(handler_time).count();
    std::lock_guard lock(mu_);
    RangeMetrics& r = range_of(scope, range);
    r.changes += changes;
    ++r.batches;
    Histogram& h = r.handler_time;
    const auto bucket = std::lower_bound(h.bounds.begin(), h.bounds.end(), seconds) - h.bounds.begin();
    ++h.counts[static_cast<std::size_t>(bucket)];
    h.sum += seconds;
    ++h.count;
}

void InProcessMetrics::range_lag(const MetricScope& scope, int range, std::chrono::milliseconds lag) {
    std::lock_guard lock(mu_);
    range_of(scope, range).lag = lag;
}

void InProcessMetrics::duplicates_skipped(const MetricScope& scope, int range, std::int64_t count) {
    std::lock_guard lock(mu_);
    range_of(scope, range).duplicates_skipped += count;
}

void InProcessMetrics::lease_acquired(const MetricScope& scope, int range) {
    std::lock_guard lock(mu_);
    RangeMetrics& r = range_of(scope, range);
    r.lease_held = true;
    ++r.lease_acquisitions;
}

namespace {

// A range no longer held has no lag of its own to show.
RangeMetrics& lease_ended(RangeMetrics& r) {
    r.lease_held = false;
    r.lag.reset();
    return r;
}

}  // namespace

void InProcessMetrics::lease_lost(const MetricScope& scope, int range) {
    std::lock_guard lock(mu_);
    ++lease_ended(range_of(scope, range)).lease_losses;
}

void InProcessMetrics::lease_released(const MetricScope& scope, int range) {
    std::lock_guard lock(mu_);
    ++lease_ended(range_of(scope, range)).lease_releases;
}

void InProcessMetrics::error(const MetricScope& scope, std::optional<int> range, errc code) {
    std::lock_guard lock(mu_);
    if (range) ++range_of(scope, *range).errors[code];
    else ++counted_[scope].errors[code];
}

void InProcessMetrics::reconnected(const MetricScope& scope, ConnectionRole role) {
    std::lock_guard lock(mu_);
    ++counted_[scope].reconnects[role];
}

}  // namespace changefeed
