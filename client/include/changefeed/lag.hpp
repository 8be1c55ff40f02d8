// Lag of a processor, per range: the client side of changefeed.lag().
//
//   for (const auto& r : changefeed::estimate_lag(collection, "billing"))
//       if (r.retention_used > 0.8) alert(r.range_id);
#pragma once

#include <changefeed/collection.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace changefeed {

struct RangeLag {
    int range_id = 0;
    std::optional<std::string> owner;  // instance holding the lease; none when free
    bool live = false;                 // the lease has not expired
    std::int64_t epoch = 0;
    std::chrono::milliseconds checkpoint_age{0};  // since the lease row last moved
    // Changes waiting after the checkpoint, counted up to count_limit: exact
    // when pending_exact, a lower bound otherwise; none when history is lost.
    std::optional<std::int64_t> pending;
    bool pending_exact = false;
    // written_at of the oldest waiting change; none when nothing waits or history is lost.
    std::optional<std::chrono::system_clock::time_point> oldest_pending;
    double retention_used = 0;  // share of the retention window the oldest waiting change used (1 = lost)
    bool history_lost = false;
};

// What changefeed.lag(table, processor, count_limit) returns, one entry per
// range in range order.  Its processor's owning role, the table's owner and
// the admins may ask.  Throws Error: collection_not_found,
// collection_not_enabled, processor_not_found (a processor that never ran:
// CF012), invalid_option (a bad count_limit), permission_denied,
// connection_failed.
std::vector<RangeLag> estimate_lag(const Collection& collection, const std::string& processor, int count_limit = 10000);

}  // namespace changefeed
