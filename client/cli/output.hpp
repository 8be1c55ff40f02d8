// Output helpers: aligned tables, durations, terminal checks.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace changefeed::cli {

// Whether stdout is a terminal (progress bars and redraws only then).
bool stdout_is_terminal();

// Columns padded to their widest cell, two spaces apart.
class Table {
public:
    explicit Table(std::vector<std::string> header) : header_(std::move(header)) {}
    void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
    bool empty() const { return rows_.empty(); }
    void print(std::ostream& out) const;

private:
    std::vector<std::string> header_;
    std::vector<std::vector<std::string>> rows_;
};

// A duration in seconds as "850ms", "12.3s", "4m05s", "2h03m", "3d04h".
std::string human_duration(double seconds);
// A count with thousands separators: 1234567 -> "1,234,567".
std::string human_count(long long n);
// A share as a percentage: 0.4567 -> "45.7%".
std::string percent(double share);

}  // namespace changefeed::cli
