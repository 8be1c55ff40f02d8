// Internal: one read of a range of the feed, one page of a backfill.
#pragma once

#include <changefeed/change.hpp>

#include "read/feed_mode.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace changefeed::detail {

// A read scoped to one tenant (a multi-tenant collection): only that tenant's changes, and,
// when the partition key begins with the tenant column, partition keys
// without the "<tenant>/" prefix.
struct TenantScope {
    std::string tenant;                   // empty: not scoped
    std::string tenant_column;            // the collection's tenant column
    bool strip_partition_prefix = false;  // the first partition-key column is the tenant column
    bool scoped() const { return !tenant.empty(); }
    // Removes the tenant component from a partition key of this tenant.
    void strip(std::string& partition_key) const;
};

struct ReadResult {
    std::vector<Change> changes;
    std::string position;  // where to resume after these changes (or after nothing)
};

// Reads at most `max` changes of one range after `since`.  Throws Error.
ReadResult read_range(pqxx::connection& c, const std::string& table, const std::string& since, int max, int range,
                      FeedMode mode, const TenantScope& scope = {});

// Several ranges that share one position, in one read: the result's position
// is valid for every one of them (rows come in seq order across the ranges,
// so a range without rows up to the last one returned has none before it).
ReadResult read_ranges(pqxx::connection& c, const std::string& table, const std::string& since, int max,
                       const std::vector<int>& ranges, FeedMode mode, const TenantScope& scope = {});

// Many ranges, each from its own position, in one read
// (changefeed.read_ranges): the changes of each range read, and where each
// range resumes once they are handled.  A range missing from `resume` was not
// read (the budget `max` ran out first): it keeps its position.
struct MultiReadResult {
    std::map<int, std::vector<Change>> changes;
    // The position after each of those changes, valid for its range alone:
    // a range's batch cut after its k-th change resumes at positions[k-1].
    // Read with positions_every N, only every N-th is there (the others empty).
    std::map<int, std::vector<std::string>> positions;
    std::map<int, std::string> resume;
    std::size_t total = 0;  // change rows in all
    std::size_t rows = 0;   // rows the statement returned, its resume markers included
};
MultiReadResult read_positions(pqxx::connection& c, const std::string& table, const std::map<int, std::string>& since,
                               int max, FeedMode mode, const TenantScope& scope = {});
// read_positions() with the settings of a processor's read: change rows
// carry their positions every `positions_every` changes of their range
// (where batches of that size end), and with `wait` (a long poll,
// read_ranges(..., wait)) a read that finds nothing waits in the server up to
// that long for a commit and returns its changes in the same call.  The rows
// are parsed here, where they are read (on the read-ahead's own thread when
// it reads).
MultiReadResult fetch_positions(pqxx::connection& c, const std::string& table, const std::map<int, std::string>& since,
                                int max, int positions_every, FeedMode mode, const TenantScope& scope = {},
                                std::chrono::milliseconds wait = std::chrono::milliseconds(0));
// fetch_positions() in its three steps, so that a processor starts its next
// read once it knows where each range resumes and parses the changes while
// the server reads on (the server and the client busy at once, not in turn):
// the statement's rows unparsed; where each range resumes and how many rows
// came (no change parsed); the changes of those rows into `out`.
pqxx::result fetch_rows(pqxx::connection& c, const std::string& table, const std::map<int, std::string>& since, int max,
                        int positions_every, FeedMode mode, const TenantScope& scope = {},
                        std::chrono::milliseconds wait = std::chrono::milliseconds(0));
MultiReadResult resume_of(const pqxx::result& rows);
void parse_changes(const pqxx::result& rows, const TenantScope& scope, MultiReadResult& out);
// Whether this server takes read_ranges(..., wait): the version has it, the
// library is preloaded (commits wake waiting reads through its shared
// memory) and the server is no standby.
bool long_poll_available(pqxx::connection& c);

// What a subscription reads: every version of all ranges, filtered in the
// database by a jsonpath (with its variables as jsonb text) and/or one document id;
// with `schema_changes`, the table's schema changes too (mode 'all_with_schema').
struct ReadFilter {
    std::optional<std::string> jsonpath;
    std::optional<std::string> vars;
    std::optional<std::string> doc_id;
    TenantScope tenant;
    bool schema_changes = false;
    bool moves = true;  // read()'s filter_moves
};
// Filtered reads of one table in one REPEATABLE READ transaction, so in one
// snapshot: a read that comes back short (fewer than `max` changes) has read
// everything up to that snapshot and resumes at it, the same position for
// every such read of the call, so subscriptions read together come together
// at one position.  `caught_up` says which did.
struct FilteredRead {
    const std::string* since;
    const ReadFilter* filter;
};
struct FilteredResult {
    ReadResult read;
    bool caught_up = false;
};
std::vector<FilteredResult> read_filtered_together(pqxx::connection& c, const std::string& table,
                                                   const std::vector<FilteredRead>& reads, int max);

struct BackfillPage {
    std::vector<Change> changes;
    std::optional<std::string> last_key;  // jsonb text of the last row's primary key
    int scanned = 0;                      // rows the page read (before a tenant filter)
};

// The next keyset page of a range's current rows after `after`.  Throws Error.
// With a scope, only the tenant's rows are returned (filtered here:
// backfill_page() has no tenant argument), so a page may be empty while
// last_key moves on.
BackfillPage backfill_page(pqxx::connection& c, const std::string& table, int range,
                           const std::optional<std::string>& after, int max, const TenantScope& scope = {});

// Checks that the connecting role may read the feed as asked (SELECT on the
// table, row-level security, tenant bindings, the tenant's own rights) by
// reading nothing from now.  Throws Error (permission_denied, ...).
void probe_read(pqxx::connection& c, const std::string& table, const std::string& tenant, FeedMode mode);

std::int64_t estimated_rows(pqxx::connection& c, const std::string& table);

}  // namespace changefeed::detail
