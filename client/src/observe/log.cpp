// The default log sink: logfmt lines on stderr.
#include <changefeed/log.hpp>

#include <changefeed/error.hpp>

#include "core/time_text.hpp"

#include <cstdio>
#include <ctime>

namespace changefeed {

const char* to_string(LogLevel level) noexcept {
    switch (level) {
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    }
    return "unknown";
}

const char* to_string(LogEvent event) noexcept {
    switch (event) {
    case LogEvent::started: return "started";
    case LogEvent::leases_acquired: return "leases_acquired";
    case LogEvent::leases_released: return "leases_released";
    case LogEvent::leases_lost: return "leases_lost";
    case LogEvent::connection_lost: return "connection_lost";
    case LogEvent::reconnected: return "reconnected";
    case LogEvent::error: return "error";
    case LogEvent::halted: return "halted";
    case LogEvent::stopped: return "stopped";
    }
    return "unknown";
}

namespace {

// A logfmt value: bare when it has no space, quote, '=' or control
// character; quoted with \" \\ \n \r \t escaped otherwise.
void append_value(std::string& out, const std::string& v) {
    bool bare = !v.empty();
    for (unsigned char ch : v)
        if (ch <= ' ' || ch == '"' || ch == '=' || ch == '\\' || ch == 0x7f) bare = false;
    if (bare) {
        out += v;
        return;
    }
    out += '"';
    for (unsigned char ch : v) {
        switch (ch) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            if (ch < ' ' || ch == 0x7f) {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\u%04x", ch);
                out += buf;
            } else {
                out += static_cast<char>(ch);
            }
        }
    }
    out += '"';
}

void field(std::string& out, const char* key, const std::string& v) {
    out += ' ';
    out += key;
    out += '=';
    append_value(out, v);
}

}  // namespace

std::string to_logfmt(const LogRecord& r) {
    std::string out = "changefeed:";
    field(out, "ts", detail::rfc3339_utc(r.time, 3));
    field(out, "level", to_string(r.level));
    field(out, "event", to_string(r.event));
    if (!r.table.empty()) field(out, "table", r.table);
    if (!r.processor.empty()) field(out, "processor", r.processor);
    if (!r.instance.empty()) field(out, "instance", r.instance);
    if (!r.ranges.empty()) {
        std::string list;
        for (int range : r.ranges) list += (list.empty() ? "" : ",") + std::to_string(range);
        field(out, "ranges", list);
    }
    if (!r.connection.empty()) field(out, "connection", r.connection);
    if (r.code) {
        field(out, "code",
              r.code.category() == changefeed_category() ? to_string(static_cast<errc>(r.code.value()))
                                                         : std::to_string(r.code.value()));
    }
    if (!r.message.empty()) field(out, "msg", r.message);
    if (!r.runbook.empty()) field(out, "runbook", r.runbook);
    return out;
}

void log_to_stderr(const LogRecord& record) {
    const std::string line = to_logfmt(record) + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace changefeed
