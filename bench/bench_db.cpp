#include "bench_db.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <unordered_map>

namespace bench {

std::int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

std::vector<std::int64_t> commit_times_us(const std::string& conninfo, const std::string& table,
                                          const std::vector<std::int64_t>& ids) {
    pqxx::connection c(conninfo);
    pqxx::work w(c);
    std::string list = "{";
    for (size_t i = 0; i < ids.size(); ++i) list += (i ? "," : "") + std::to_string(ids[i]);
    list += "}";
    std::unordered_map<std::int64_t, std::int64_t> at;
    for (auto row : w.exec_params("SELECT id, (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint "
                                  "FROM " +
                                      w.quote_name(table) + " WHERE id = ANY($1::bigint[])",
                                  list))
        at[row[0].as<std::int64_t>()] = row[1].is_null() ? 0 : row[1].as<std::int64_t>();
    std::vector<std::int64_t> out;
    out.reserve(ids.size());
    for (auto id : ids) out.push_back(at.count(id) ? at[id] : 0);
    return out;
}

std::string percentiles_ms(std::vector<double> v) {
    if (v.empty()) return "nan nan nan";
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min(v.size() - 1, size_t(q * double(v.size())))]; };
    char buf[128];
    std::snprintf(buf, sizeof buf, "%.3f %.3f %.3f", at(0.50), at(0.95), at(0.99));
    return buf;
}

bool leases_even(pqxx::connection& c, const std::string& table, const std::string& name, int instances) {
    pqxx::nontransaction tx(c);
    auto r = tx.exec_params1(
        "WITH s AS (SELECT owner, count(*) AS n FROM changefeed.leases"
        "            WHERE table_name = $1::regclass AND processor = $2 AND owner IS NOT NULL AND live"
        "            GROUP BY owner),"
        "     t AS (SELECT ranges FROM changefeed.collections WHERE table_name = $1::regclass)"
        " SELECT count(*) = $3 AND sum(n) = (SELECT ranges FROM t)"
        "        AND min(n) >= (SELECT ranges FROM t) / $3"
        "        AND max(n) <= ((SELECT ranges FROM t) + $3 - 1) / $3 FROM s",
        table, name, instances);
    return !r[0].is_null() && r[0].as<bool>();
}

}  // namespace bench
