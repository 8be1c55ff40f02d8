// Server times (timestamptz) reach the client as microseconds since the Unix
// epoch: queries select epoch_microseconds_sql(column), so that no timestamp
// text is ever parsed here and no session TimeZone or DateStyle can change it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace changefeed::detail {

// `column` as bigint microseconds since 1970-01-01 00:00 UTC (NULL stays NULL).
// extract() returns numeric, so the multiplication is exact.
inline std::string epoch_microseconds_sql(const std::string& column) {
    return "(extract(epoch FROM " + column + ") * 1000000)::bigint";
}

// system_clock counts from the Unix epoch (guaranteed since C++20).
inline std::chrono::system_clock::time_point time_of_epoch_microseconds(std::int64_t us) {
    return std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::microseconds(us)));
}

}  // namespace changefeed::detail
