#include "output.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

namespace changefeed::cli {

bool stdout_is_terminal() { return isatty(STDOUT_FILENO) == 1; }

void Table::print(std::ostream& out) const {
    std::vector<std::size_t> width(header_.size(), 0);
    auto measure = [&](const std::vector<std::string>& row) {
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) width[i] = std::max(width[i], row[i].size());
    };
    measure(header_);
    for (const auto& r : rows_) measure(r);
    auto line = [&](const std::vector<std::string>& row) {
        std::string s;
        for (std::size_t i = 0; i < row.size() && i < width.size(); ++i) {
            if (i) s += "  ";
            s += row[i];
            if (i + 1 < row.size()) s.append(width[i] - row[i].size(), ' ');
        }
        out << s << '\n';
    };
    line(header_);
    for (const auto& r : rows_) line(r);
}

std::string human_duration(double s) {
    char buf[64];
    if (s < 0) s = 0;
    if (s < 1) std::snprintf(buf, sizeof buf, "%dms", static_cast<int>(std::lround(s * 1000)));
    else if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", s);
    else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
    else if (s < 86400)
        std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) % 3600 / 60);
    else
        std::snprintf(buf, sizeof buf, "%lldd%02dh", static_cast<long long>(s) / 86400,
                      static_cast<int>(static_cast<long long>(s) % 86400 / 3600));
    return buf;
}

std::string human_count(long long n) {
    std::string digits = std::to_string(n < 0 ? -n : n);
    std::string out;
    for (std::size_t i = 0; i < digits.size(); ++i) {
        if (i && (digits.size() - i) % 3 == 0) out += ',';
        out += digits[i];
    }
    return n < 0 ? "-" + out : out;
}

std::string percent(double share) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", share * 100);
    return buf;
}

}  // namespace changefeed::cli
