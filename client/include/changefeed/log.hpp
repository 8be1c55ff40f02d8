// What a processor logs: one record per event (started, leases acquired,
// released or lost, a connection lost and back, each failure, a halt,
// stopped).  By default each record is one logfmt line on stderr:
//
//   changefeed: ts=2026-11-30T11:02:03.123Z level=error event=error table=public.orders
//     processor=billing instance=web-1 ranges=3 code=handler_failed msg="handler failed: timeout"
//
// (one line; the leading "changefeed:" tells the library's lines apart in a
// service's stderr, logfmt parsers read it as a key without a value).
// ProcessorOptions::log replaces that with a sink of your own.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <system_error>
#include <vector>

namespace changefeed {

enum class LogLevel { info, warn, error };

enum class LogEvent {
    started,          // start() succeeded
    leases_acquired,  // ranges taken (at start, free or expired ones, by balancing)
    leases_released,  // ranges given up (stop, halt)
    leases_lost,      // ranges taken over by another instance, or expired
    connection_lost,  // a connection dropped; it is reconnected with backoff (told once per outage)
    reconnected,      // that connection is back
    error,            // a failure, as told to on_error (code, message, runbook)
    halted,           // the recovery policy halted the processor or a range (runbook)
    stopped,          // the processor stopped (stop(), the destructor, or a halt)
};

const char* to_string(LogLevel level) noexcept;
const char* to_string(LogEvent event) noexcept;

struct LogRecord {
    std::chrono::system_clock::time_point time;
    LogLevel level = LogLevel::info;
    LogEvent event = LogEvent::started;
    std::string table;      // the collection's table as given to Collection
    std::string processor;  // the name on the server (with the tenant prefix, if any)
    std::string instance;
    std::vector<int> ranges;  // the ranges concerned; empty: the processor as a whole
    std::string connection;   // connection_lost, reconnected: "worker", "leases" or "listener"
    std::error_code code;     // error, halted: an errc value
    std::string message;
    std::string runbook;  // error, halted: set when the recovery policy halted something
};

using LogSink = std::function<void(const LogRecord&)>;

// The record as one logfmt line (no newline), as the default sink writes it.
std::string to_logfmt(const LogRecord& record);
// The default sink: to_logfmt() and a newline on stderr, in one write.
void log_to_stderr(const LogRecord& record);

}  // namespace changefeed
