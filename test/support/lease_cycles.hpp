// Lease checks counted in the instances' own steps, not in seconds: rounds of
// the owners' renewals, seen in the leases table.  A lease keeper balances on
// the thread that renews, at least as often as it renews (acquire_interval <=
// renew_interval), so between two renewals of an instance one of its acquire
// steps ran.  On a slow machine the rounds slow down with everything else.
#pragma once

#include "support/cluster.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>

namespace cftest {

// Round after round, up to `max_rounds`: reads the server's clock, then waits
// until every lease each of `owners` holds of (`table`, `processor`) was
// renewed after it (expires_at beyond it by `lease_duration`), or `done`
// holds.  Returns how many rounds completed before `done` held (max_rounds
// if it did not), or none if a round's renewals did not come within `timeout`
// (scaled).
inline std::optional<int> rounds_until(Cluster& c, const std::string& table, const std::string& processor,
                                       const std::set<std::string>& owners, std::chrono::milliseconds lease_duration,
                                       const std::function<bool()>& done, int max_rounds,
                                       std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    std::string list;
    for (const auto& o : owners) list += (list.empty() ? "'" : ", '") + o + "'";
    for (int round = 0; round < max_rounds; ++round) {
        const auto since = c.exec("SELECT now()::text")[0][0].as<std::string>();
        const std::string renewed = "SELECT count(*) FROM (SELECT owner FROM changefeed.leases WHERE table_name = '" +
                                    table + "'::regclass AND processor = '" + processor + "' AND owner IN (" + list +
                                    ") GROUP BY owner HAVING min(expires_at) > '" + since +
                                    "'::timestamptz + interval '" + std::to_string(lease_duration.count()) +
                                    " milliseconds') renewed";
        bool held = false;
        if (!eventually([&] { return (held = done()) || c.exec(renewed)[0][0].as<std::size_t>() == owners.size(); },
                        timeout))
            return std::nullopt;
        if (held) return round;
    }
    return max_rounds;
}

// Waits for `rounds` rounds of renewals of every owner (each ran at least
// rounds - 1 acquire steps after the call); whether they came.
inline bool lease_cycles(Cluster& c, const std::string& table, const std::string& processor,
                         const std::set<std::string>& owners, std::chrono::milliseconds lease_duration,
                         int rounds = 4) {
    return rounds_until(
               c, table, processor, owners, lease_duration, [] { return false; }, rounds) == rounds;
}

}  // namespace cftest
