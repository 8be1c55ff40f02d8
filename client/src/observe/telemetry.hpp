// Internal: what a processor measures and logs (metrics.hpp, log.hpp), in
// one place, so that the threads that see an event make one call each.
// Without a Metrics object every measurement is a null check.
#pragma once

#include <changefeed/log.hpp>
#include <changefeed/metrics.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace changefeed::detail {

class Telemetry {
public:
    // No metrics, the default sink.
    Telemetry() = default;
    Telemetry(std::shared_ptr<Metrics> metrics, LogSink log) : metrics_(std::move(metrics)), log_(std::move(log)) {}

    // Who the records and measurements are of; set before the threads start.
    void set_scope(MetricScope scope) {
        metric_scope_ = scope;
        scope_ = std::move(scope);
    }
    // The collection as the catalog names it, "schema.table" whatever the
    // search_path, for the metrics' table label (the logs keep the name as
    // given), and its ranges, whose series start() creates at 0.  Set before
    // the threads start.
    void set_collection(std::string schema_table, int ranges) {
        if (!schema_table.empty()) metric_scope_.table = std::move(schema_table);
        ranges_ = ranges;
    }
    const MetricScope& scope() const { return scope_; }
    bool measuring() const { return metrics_ != nullptr; }

    void log(LogLevel level, LogEvent event, std::vector<int> ranges = {}, std::string message = {}) const;
    // A failure as told to on_error: counted by code, logged (errc::halted as a halt).
    void error(const ErrorInfo& info) const;
    // Changes of the lease set: `given_up` were lost (taken over, expired) or released.
    void leases(const std::vector<int>& acquired, const std::vector<int>& given_up, bool lost) const;
    // A connection dropped: logged once per outage.
    void connection_lost(ConnectionRole role, const std::string& why);
    // A connection is up: after connection_lost(), a reconnect.
    void connected(ConnectionRole role);

    // A delivered batch (metrics only).  `lag`: for a log batch, the age of its last change.
    void delivered(int range, std::int64_t changes, std::chrono::nanoseconds handler_time, std::int64_t duplicates,
                   std::optional<std::chrono::system_clock::time_point> last_written) const;
    // A read of the range found nothing waiting.
    void caught_up(int range) const;

private:
    void emit(LogRecord record) const;

    std::shared_ptr<Metrics> metrics_;
    LogSink log_;
    MetricScope scope_;
    MetricScope metric_scope_;
    int ranges_ = 0;
    std::mutex mu_;  // guards down_since_
    std::optional<std::chrono::steady_clock::time_point> down_since_[3];
};

}  // namespace changefeed::detail
