#include "core/time_text.hpp"

#include <cstdio>

namespace changefeed::detail {

std::string rfc3339_utc(std::chrono::system_clock::time_point t, int fraction_digits) {
    using namespace std::chrono;
    const auto us = floor<microseconds>(t);
    const auto day = floor<days>(us);
    const year_month_day ymd{day};
    const hh_mm_ss hms{us - day};
    long long fraction = hms.subseconds().count();
    for (int d = 6; d > fraction_digits; --d) fraction /= 10;
    char buf[48];
    std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%0*lldZ", static_cast<int>(ymd.year()),
                  static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                  static_cast<int>(hms.hours().count()), static_cast<int>(hms.minutes().count()),
                  static_cast<int>(hms.seconds().count()), fraction_digits, fraction);
    return buf;
}

}  // namespace changefeed::detail
