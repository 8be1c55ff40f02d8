// Internal: one read of a range of the feed, one page of a backfill.
#pragma once

#include <changefeed/change.hpp>
#include <changefeed/processor.hpp>

#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace changefeed::detail {

struct ReadResult {
    std::vector<Change> changes;
    std::string position;  // where to resume after these changes (or after nothing)
};

// Reads at most `max` changes of one range after `since`.  Throws Error.
ReadResult read_range(pqxx::connection& c, const std::string& table, const std::string& since, int max,
                      int range, FeedMode mode);

// Several ranges that share one position, in one read: the result's position
// is valid for every one of them (rows come in seq order across the ranges,
// so a range without rows up to the last one returned has none before it).
ReadResult read_ranges(pqxx::connection& c, const std::string& table, const std::string& since, int max,
                       const std::vector<int>& ranges, FeedMode mode);

// What a subscription reads: every version of all ranges, filtered in the
// database by a jsonpath (with its variables as jsonb text) and/or one document id.
struct ReadFilter {
    std::optional<std::string> jsonpath;
    std::optional<std::string> vars;
    std::optional<std::string> doc_id;
};
ReadResult read_filtered(pqxx::connection& c, const std::string& table, const std::string& since, int max,
                         const ReadFilter& filter);

struct BackfillPage {
    std::vector<Change> changes;
    std::optional<std::string> last_key;  // jsonb text of the last row's primary key
};

// The next keyset page of a range's current rows after `after`.  Throws Error.
BackfillPage backfill_page(pqxx::connection& c, const std::string& table, int range,
                           const std::optional<std::string>& after, int max);

std::int64_t estimated_rows(pqxx::connection& c, const std::string& table);

}  // namespace changefeed::detail
