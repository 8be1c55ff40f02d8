#include "observe/telemetry.hpp"

#include <changefeed/error.hpp>

#include <algorithm>

namespace changefeed::detail {

void Telemetry::emit(LogRecord record) const {
    record.time = std::chrono::system_clock::now();
    record.table = scope_.table;
    record.processor = scope_.processor;
    record.instance = scope_.instance;
    try {
        if (log_) log_(record);
        else log_to_stderr(record);
    } catch (...) {
        // A failing sink must not stop the thread that logs.
    }
}

void Telemetry::log(LogLevel level, LogEvent event, std::vector<int> ranges, std::string message) const {
    // Starting and stopping are measured too: the series that exist from the start.
    if (metrics_ && (event == LogEvent::started || event == LogEvent::stopped)) {
        try {
            if (event == LogEvent::started) metrics_->started(metric_scope_, ranges_);
            else metrics_->stopped(metric_scope_);
        } catch (...) {
        }
    }
    LogRecord r;
    r.level = level;
    r.event = event;
    r.ranges = std::move(ranges);
    r.message = std::move(message);
    emit(std::move(r));
}

void Telemetry::error(const ErrorInfo& info) const {
    const bool is_ours = info.code.category() == changefeed_category();
    if (metrics_ && is_ours) {
        try {
            metrics_->error(metric_scope_, info.range_id, static_cast<errc>(info.code.value()));
        } catch (...) {
        }
    }
    LogRecord r;
    r.level = LogLevel::error;
    r.event = is_ours && info.code == make_error_code(errc::halted) ? LogEvent::halted : LogEvent::error;
    if (info.range_id) r.ranges.push_back(*info.range_id);
    r.code = info.code;
    r.message = info.message;
    r.runbook = info.runbook;
    emit(std::move(r));
}

void Telemetry::leases(const std::vector<int>& acquired, const std::vector<int>& given_up, bool lost) const {
    if (metrics_) {
        try {
            for (int range : given_up) {
                if (lost) metrics_->lease_lost(metric_scope_, range);
                else metrics_->lease_released(metric_scope_, range);
            }
            for (int range : acquired) metrics_->lease_acquired(metric_scope_, range);
        } catch (...) {
        }
    }
    if (!given_up.empty())
        log(lost ? LogLevel::warn : LogLevel::info, lost ? LogEvent::leases_lost : LogEvent::leases_released, given_up);
    if (!acquired.empty()) log(LogLevel::info, LogEvent::leases_acquired, acquired);
}

void Telemetry::connection_lost(ConnectionRole role, const std::string& why) {
    {
        std::lock_guard lock(mu_);
        auto& since = down_since_[static_cast<int>(role)];
        if (since) return;  // still the same outage
        since = std::chrono::steady_clock::now();
    }
    LogRecord r;
    r.level = LogLevel::warn;
    r.event = LogEvent::connection_lost;
    r.connection = to_string(role);
    r.code = make_error_code(errc::connection_failed);
    r.message = why;
    emit(std::move(r));
}

void Telemetry::connected(ConnectionRole role) {
    std::chrono::steady_clock::time_point since;
    {
        std::lock_guard lock(mu_);
        auto& down = down_since_[static_cast<int>(role)];
        if (!down) return;  // the first connection, not a reconnect
        since = *down;
        down.reset();
    }
    if (metrics_) {
        try {
            metrics_->reconnected(metric_scope_, role);
        } catch (...) {
        }
    }
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since).count();
    LogRecord r;
    r.level = LogLevel::info;
    r.event = LogEvent::reconnected;
    r.connection = to_string(role);
    r.message = "after " + std::to_string(ms) + " ms";
    emit(std::move(r));
}

void Telemetry::delivered(int range, std::int64_t changes, std::chrono::nanoseconds handler_time,
                          std::int64_t duplicates,
                          std::optional<std::chrono::system_clock::time_point> last_written) const {
    if (!metrics_) return;
    try {
        metrics_->batch_delivered(metric_scope_, range, changes, handler_time);
        if (duplicates > 0) metrics_->duplicates_skipped(metric_scope_, range, duplicates);
        if (last_written) {
            const auto age = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now() -
                                                                                   *last_written);
            metrics_->range_lag(metric_scope_, range, std::max(age, std::chrono::milliseconds(0)));
        }
    } catch (...) {
    }
}

void Telemetry::caught_up(int range) const {
    if (!metrics_) return;
    try {
        metrics_->range_lag(metric_scope_, range, std::chrono::milliseconds(0));
    } catch (...) {
    }
}

}  // namespace changefeed::detail
