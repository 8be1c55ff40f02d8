// Small helpers shared by the benchmark programs.
#pragma once
#include <pqxx/pqxx>

#include <cstdint>
#include <string>
#include <vector>

namespace bench {

// Wall-clock microseconds since the epoch (the server runs on this machine,
// so its commit timestamps and this clock are comparable).
std::int64_t now_us();

// Commit timestamps (microseconds) of the transactions that inserted `ids`
// into `table` (needs track_commit_timestamp = on).
std::vector<std::int64_t> commit_times_us(const std::string& conninfo, const std::string& table,
                                          const std::vector<std::int64_t>& ids);

// "p50 p95 p99" of latencies in milliseconds, printed as a TSV-ready line.
std::string percentiles_ms(std::vector<double> latencies_ms);

// Whether every range of `table` is owned by a live lease of processor
// `name`, shared by `instances` owners each holding R/N ranges rounded down or
// up (R the table's ranges).
bool leases_even(pqxx::connection& c, const std::string& table, const std::string& name, int instances);

}  // namespace bench
