// read() goes through a REPEATABLE READ transaction, so that
// current_position() after an empty read is the read's own snapshot: a
// separate statement would skip what committed in between.  read_ranges()
// returns that position itself (its marker rows), so it is one statement.
#include "read/feed_reader.hpp"

#include "core/db.hpp"
#include "core/pqxx_compat.hpp"
#include "core/statements.hpp"
#include "core/server_time.hpp"

#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/parser.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>

namespace changefeed::detail {
namespace {

// One parser per thread, its buffers kept from document to document; each
// document in the default memory resource, so that a handler may keep it as
// long as it likes without holding anything else.
boost::json::value json_of(const FieldView& f) {
    if (f.is_null()) return nullptr;
    thread_local boost::json::parser parser;
    parser.reset();
    boost::system::error_code ec;
    parser.write(f.c_str(), f.size(), ec);
    if (ec) throw boost::system::system_error(ec);
    return parser.release();
}

// read() names nothing else (a schema change only in mode 'all_with_schema').
Operation operation_of(const std::string& s) { return operation_named(s).value_or(Operation::clear); }

}  // namespace

namespace {

const std::string read_columns =
    "SELECT seq, range_id, operation, doc_id, partition_key, current::text, previous::text,"
    "       ttl_expired, " +
    epoch_microseconds_sql("written_at") + ", tenant, \"position\", txid::text, event_id";

// One change row of changefeed.read() or read_ranges() (read_columns).
Change change_of(const RowView& row, const TenantScope& scope) {
    Change ch;
    ch.seq = row[0].as<std::int64_t>();
    ch.range_id = row[1].as<int>();
    ch.operation = operation_of(row[2].as<std::string>());
    ch.doc_id = row[3].is_null() ? std::string() : row[3].as<std::string>();
    ch.partition_key = row[4].is_null() ? std::string() : row[4].as<std::string>();
    ch.current = json_of(row[5]);
    ch.previous = json_of(row[6]);
    if (!row[5].is_null()) ch.current_json.assign(row[5].c_str(), row[5].size());
    if (!row[6].is_null()) ch.previous_json.assign(row[6].c_str(), row[6].size());
    ch.ttl_expired = row[7].as<bool>();
    if (!row[8].is_null()) ch.written_at = time_of_epoch_microseconds(row[8].as<std::int64_t>());
    if (!row[9].is_null()) ch.tenant = row[9].as<std::string>();
    if (scope.scoped()) scope.strip(ch.partition_key);
    ch.txid = std::stoull(row[11].c_str());
    ch.event_id = row[12].as<std::string>();
    return ch;
}

// Rows of changefeed.read(), then the position to resume from (after nothing:
// current_position() in the read's own snapshot).
template <class Tx>
ReadResult collect(Tx& tx, const pqxx::result& r, const TenantScope& scope) {
    ReadResult out;
    if (r.empty()) {
        out.position = tx.exec("SELECT changefeed.current_position()")[0][0].template as<std::string>();
        return out;
    }
    out.changes.reserve(r.size());
    for (const auto& row : r) out.changes.push_back(change_of(row, scope));
    out.position = r[r.size() - 1][10].as<std::string>();
    return out;
}

// Whether a row (as jsonb) is the scope's tenant's: its tenant column's value,
// as text the way the capture trigger records it (strings unquoted).
bool belongs_to(const boost::json::value& row, const TenantScope& scope) {
    const auto* obj = row.if_object();
    if (!obj) return false;
    auto it = obj->find(scope.tenant_column);
    if (it == obj->end() || it->value().is_null()) return false;
    if (const auto* s = it->value().if_string()) return *s == scope.tenant;
    return boost::json::serialize(it->value()) == scope.tenant;
}

using ReadTx = ReadOnlySnapshotTx;  // pqxx_compat.hpp

}  // namespace

void TenantScope::strip(std::string& partition_key) const {
    if (strip_partition_prefix && partition_key.size() > tenant.size() &&
        partition_key.compare(0, tenant.size(), tenant) == 0 && partition_key[tenant.size()] == '/')
        partition_key.erase(0, tenant.size() + 1);
}

ReadResult read_range(pqxx::connection& c, const std::string& table, const std::string& since, int max, int range,
                      FeedMode mode, const TenantScope& scope) {
    return read_ranges(c, table, since, max, {range}, mode, scope);
}

ReadResult read_ranges(pqxx::connection& c, const std::string& table, const std::string& since, int max,
                       const std::vector<int>& ranges, FeedMode mode, const TenantScope& scope) {
    std::string list = "{";
    for (size_t i = 0; i < ranges.size(); ++i) list += (i ? "," : "") + std::to_string(ranges[i]);
    list += "}";
    return translated([&] {
        ReadTx tx(c);
        auto r = tx.exec_params(
            std::string(read_columns) + "  FROM changefeed.read($1::regclass, $2, $3, $4::int[], $5, tenant => $6)",
            table, since, max, list, read_mode(mode), scope.scoped() ? scope.tenant.c_str() : nullptr);
        auto out = collect(tx, r, scope);
        tx.commit();
        return out;
    });
}

namespace {

template <class Tx>
pqxx::result exec_filtered(Tx& tx, const std::string& table, const std::string& since, int max,
                           const ReadFilter& filter) {
    return tx.exec_params(
        std::string(read_columns) +
            "  FROM changefeed.read($1::regclass, $2, $3, NULL, $8, $4::jsonpath, $5::jsonb,"
            "                       CASE WHEN $6::text IS NULL THEN NULL ELSE ARRAY[$6::text] END,"
            "                       tenant => $7, filter_moves => $9)",
        table, since, max, filter.jsonpath ? filter.jsonpath->c_str() : nullptr,
        filter.vars ? filter.vars->c_str() : nullptr, filter.doc_id ? filter.doc_id->c_str() : nullptr,
        filter.tenant.scoped() ? filter.tenant.tenant.c_str() : nullptr,
        read_mode(filter.schema_changes ? FeedMode::all_versions_and_schema : FeedMode::all_versions_and_deletes),
        filter.moves);
}

}  // namespace

std::vector<FilteredResult> read_filtered_together(pqxx::connection& c, const std::string& table,
                                                   const std::vector<FilteredRead>& reads, int max) {
    return translated([&] {
        ReadTx tx(c);
        std::vector<FilteredResult> out(reads.size());
        bool any_caught_up = false;
        for (std::size_t i = 0; i < reads.size(); ++i) {
            auto r = exec_filtered(tx, table, *reads[i].since, max, *reads[i].filter);
            auto& o = out[i];
            o.read.changes.reserve(r.size());
            for (const auto& row : r) o.read.changes.push_back(change_of(row, reads[i].filter->tenant));
            // read() stops short of `max` only once it read a window up to
            // the statement's snapshot, the transaction's: the last row then
            // carries that snapshot alone, which is current_position() here
            // (where an empty read always resumed).
            o.caught_up = static_cast<int>(r.size()) < max;
            any_caught_up = any_caught_up || o.caught_up;
            if (!o.caught_up) o.read.position = r[r.size() - 1][10].as<std::string>();
        }
        if (any_caught_up) {
            // One encoding of the snapshot for all (a position also records
            // the WAL point it was made at, so two encodings differ as text).
            const auto now = tx.exec("SELECT changefeed.current_position()")[0][0].as<std::string>();
            for (auto& o : out)
                if (o.caught_up) o.read.position = now;
        }
        tx.commit();
        return out;
    });
}

BackfillPage backfill_page(pqxx::connection& c, const std::string& table, int range,
                           const std::optional<std::string>& after, int max, const TenantScope& scope) {
    return translated([&] {
        // One snapshot per page: rows changed between pages come again from
        // the log, which continues from the position taken before the scan.
        ReadTx tx(c);
        auto r = tx.exec_params("SELECT doc_id, partition_key, key::text, current::text"
                                "  FROM changefeed.backfill_page($1::regclass, $2, $3::jsonb, $4)",
                                table, range, after ? after->c_str() : nullptr, max);
        tx.commit();
        BackfillPage out;
        out.scanned = static_cast<int>(r.size());
        for (const auto& row : r) {
            Change ch;
            ch.operation = Operation::create;
            ch.from_backfill = true;
            ch.range_id = range;
            ch.doc_id = row[0].as<std::string>();
            ch.partition_key = row[1].as<std::string>();
            ch.current = json_of(row[3]);
            if (!row[3].is_null()) ch.current_json.assign(row[3].c_str(), row[3].size());
            out.last_key = row[2].as<std::string>();
            if (scope.scoped()) {
                if (!belongs_to(ch.current, scope)) continue;
                ch.tenant = scope.tenant;
                scope.strip(ch.partition_key);
            }
            out.changes.push_back(std::move(ch));
        }
        return out;
    });
}

void probe_read(pqxx::connection& c, const std::string& table, const std::string& tenant, FeedMode mode) {
    translated([&] {
        pqxx::read_transaction tx(c);
        // In the feed's mode: the all-versions feed of a collection that logs
        // keys alone is refused here (CF021), the latest-version one is not.
        tx.exec_params("SELECT count(*) FROM changefeed.read($1::regclass, changefeed.current_position(), 1,"
                       "                                     mode => $3, tenant => $2)",
                       table, tenant.empty() ? nullptr : tenant.c_str(), read_mode(mode));
    });
}

std::int64_t estimated_rows(pqxx::connection& c, const std::string& table) {
    return translated([&] {
        pqxx::read_transaction tx(c);
        return tx.exec_params("SELECT changefeed.estimated_rows($1::regclass)", table)[0][0].as<std::int64_t>();
    });
}

}  // namespace changefeed::detail

namespace changefeed::detail {

// The ranges as an int[] literal (libpqxx 6 has no array parameters; they
// are numbers, nothing to quote).
static std::string int_array(const std::map<int, std::string>& since) {
    std::string out = "{";
    for (const auto& [range, pos] : since) {
        if (out.size() > 1) out += ',';
        out += std::to_string(range);
    }
    return out + "}";
}

// The positions as jsonb text, unpacked in order by the SQL: one for all the
// ranges when they share it (an idle instance's ranges all resume at one
// snapshot), so an idle read sends one position, not one per range.
static std::string json_positions(const std::map<int, std::string>& since) {
    boost::json::array a;
    const bool shared = since.size() > 1 && std::all_of(since.begin(), since.end(), [&](const auto& e) {
                            return e.second == since.begin()->second;
                        });
    if (shared) {
        a.emplace_back(since.begin()->second);
    } else {
        a.reserve(since.size());
        for (const auto& [range, pos] : since) a.emplace_back(pos);
    }
    return boost::json::serialize(a);
}

// The statement of fetch_positions(): the change columns and the resume
// marker's, from read_ranges() with its arguments in order, and the long
// poll's `wait` as the last one when the read waits.
static std::string read_ranges_sql(bool waits) {
    const std::string columns = read_columns + ", resume_ranges::text";
    const std::string ranges_and_positions =
        "$1::regclass, $2::int[],"
        "       ARRAY(SELECT e FROM pg_catalog.jsonb_array_elements_text($3::jsonb)"
        "                  WITH ORDINALITY AS t(e, i) ORDER BY i)";
    const std::string budget_mode_scope = "       $4, $5, tenant => $6, positions_every => $7";
    const std::string wait = waits ? ", wait => $8::interval" : "";
    return columns + "  FROM changefeed.read_ranges(" + ranges_and_positions + "," + budget_mode_scope + wait + ")";
}

pqxx::result fetch_rows(pqxx::connection& c, const std::string& table, const std::map<int, std::string>& since, int max,
                        int positions_every, FeedMode mode, const TenantScope& scope, std::chrono::milliseconds wait) {
    // A prepared statement: a wake-up's read is parsed and planned once per
    // connection, not every time (about a third of a small read's time).
    static const std::string sql = read_ranges_sql(false);
    static const std::string sql_wait = read_ranges_sql(true);
    return translated([&] {
        const bool waits = wait.count() > 0;
        const std::string name = waits ? "changefeed_read_positions_wait" : "changefeed_read_positions";
        // One statement, no transaction block: read_ranges() reads in the
        // statement's snapshot, where idle ranges resume too.
        pqxx::nontransaction tx(c);
        const char* mode_name = read_mode(mode);
        const char* tenant = scope.scoped() ? scope.tenant.c_str() : nullptr;
        const int every = std::max(1, positions_every);
        auto r = waits ? exec_statement(c, tx, name, sql_wait, table, int_array(since), json_positions(since), max,
                                        mode_name, tenant, every, std::to_string(wait.count()) + " milliseconds")
                       : exec_statement(c, tx, name, sql, table, int_array(since), json_positions(since), max,
                                        mode_name, tenant, every);
        tx.commit();
        return r;
    });
}

MultiReadResult fetch_positions(pqxx::connection& c, const std::string& table, const std::map<int, std::string>& since,
                                int max, int positions_every, FeedMode mode, const TenantScope& scope,
                                std::chrono::milliseconds wait) {
    const pqxx::result rows = fetch_rows(c, table, since, max, positions_every, mode, scope, wait);
    MultiReadResult out = resume_of(rows);
    parse_changes(rows, scope, out);
    return out;
}

bool long_poll_available(pqxx::connection& c) {
    return translated([&] {
        pqxx::nontransaction tx(c);
        return tx
            .exec(
                "SELECT pg_catalog.to_regprocedure('changefeed.read_ranges(regclass, int[], text[], int, text, "
                "text, interval, int)') IS NOT NULL AND changefeed.preloaded() AND NOT pg_catalog.pg_is_in_recovery()")
                [0][0]
            .as<bool>();
    });
}

MultiReadResult resume_of(const pqxx::result& r) {
    return translated([&] {
        MultiReadResult out;
        out.rows = r.size();
        for (const auto& row : r) {
            if (!row[0].is_null()) {
                ++out.total;
                continue;
            }
            // A marker: "{1,2,3}" resume at its position (in range order:
            // each goes in at the end when it is the only marker).
            const std::string pos = row[10].as<std::string>();
            const char* list = row[13].c_str();
            int v = 0;
            bool in_number = false;
            for (const char* ch = list; *ch; ++ch) {
                if (*ch >= '0' && *ch <= '9') {
                    v = v * 10 + (*ch - '0');
                    in_number = true;
                } else if (in_number) {
                    out.resume.insert_or_assign(out.resume.end(), v, pos);
                    v = 0;
                    in_number = false;
                }
            }
        }
        return out;
    });
}

void parse_changes(const pqxx::result& r, const TenantScope& scope, MultiReadResult& out) {
    translated([&] {
        for (const auto& row : r) {
            if (row[0].is_null()) continue;
            Change ch = change_of(row, scope);
            // Null where no batch ends (read_ranges(positions_every)).
            auto& at = out.positions[ch.range_id];
            if (row[10].is_null()) at.emplace_back();
            else at.push_back(row[10].as<std::string>());
            out.changes[ch.range_id].push_back(std::move(ch));
        }
    });
}

MultiReadResult read_positions(pqxx::connection& c, const std::string& table, const std::map<int, std::string>& since,
                               int max, FeedMode mode, const TenantScope& scope) {
    return fetch_positions(c, table, since, max, 1, mode, scope);
}

}  // namespace changefeed::detail
