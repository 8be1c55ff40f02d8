// Internal: time points as RFC 3339 text in UTC -- what the log records, the
// CloudEvents `time` and the timestamptz arguments of lease_init carry.
#pragma once

#include <chrono>
#include <string>

namespace changefeed::detail {

// "2026-12-01T12:00:00.123456Z" with `fraction_digits` (1 to 6) digits of the
// second, cut (not rounded) from the microseconds.
std::string rfc3339_utc(std::chrono::system_clock::time_point t, int fraction_digits);

}  // namespace changefeed::detail
