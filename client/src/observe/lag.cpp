// estimate_lag(): one call of changefeed.lag() on a short-lived connection.
#include <changefeed/lag.hpp>

#include "core/db.hpp"
#include "core/server_time.hpp"

namespace changefeed {

std::vector<RangeLag> estimate_lag(const Collection& collection, const std::string& processor, int count_limit) {
    if (count_limit < 1 || count_limit > 100000)
        throw Error(errc::invalid_option, "count_limit must be between 1 and 100000");
    auto conn = detail::connect(collection.conninfo());
    return detail::translated_names(processor, std::nullopt, [&] {
        pqxx::read_transaction tx(*conn);
        auto r = tx.exec_params("SELECT range_id, owner, live, epoch,"
                                "       (extract(epoch FROM checkpoint_age) * 1000)::bigint,"
                                "       pending, pending_exact, " +
                                    detail::epoch_microseconds_sql("oldest_pending") +
                                    ","
                                    "       retention_used::float8, history_lost"
                                    "  FROM changefeed.lag($1::regclass, $2, $3) ORDER BY range_id",
                                collection.table(), processor, count_limit);
        std::vector<RangeLag> out;
        out.reserve(r.size());
        for (const auto& row : r) {
            RangeLag l;
            l.range_id = row[0].as<int>();
            if (!row[1].is_null()) l.owner = row[1].as<std::string>();
            l.live = !row[2].is_null() && row[2].as<bool>();
            l.epoch = row[3].as<std::int64_t>();
            l.checkpoint_age = std::chrono::milliseconds(row[4].is_null() ? 0 : row[4].as<std::int64_t>());
            if (!row[5].is_null()) l.pending = row[5].as<std::int64_t>();
            l.pending_exact = row[6].as<bool>();
            if (!row[7].is_null()) l.oldest_pending = detail::time_of_epoch_microseconds(row[7].as<std::int64_t>());
            l.retention_used = row[8].is_null() ? 0 : row[8].as<double>();
            l.history_lost = row[9].as<bool>();
            out.push_back(std::move(l));
        }
        return out;
    });
}

}  // namespace changefeed
