// One change read from the feed.
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace changefeed {

// The operations as the change log names them (changefeed.log.operation and
// to_string()).  `delete` is a C++ keyword, so that one enumerator carries the
// customary trailing underscore; it still reads, and greps, as the SQL word.
enum class Operation {
    create,   // INSERT: a new row
    replace,  // UPDATE: `current` is the whole row, whatever columns the write touched
    delete_,  // DELETE (all-versions feed and subscriptions); `previous` holds the row if kept
    clear,    // TRUNCATE of the table (all-versions feed and subscriptions)
    // The table changed shape (ALTER TABLE ... ADD, DROP, RENAME COLUMN, a
    // type or key change): only where asked for (AllVersionsOptions and
    // SubscriptionOptions::schema_changes), in order with the data.  `current`
    // is the change: {"version", "previous_version", "columns": [{"attnum",
    // "name", "type"}], "key", "previous_key", "added", "dropped", "renamed":
    // [{"attnum", "from", "to"}], "retyped": [{"attnum", "name", "from",
    // "to"}]}; doc_id and partition_key are empty.  Every range carries it.
    schema,
};

const char* to_string(Operation op) noexcept;

// `json` parsed with every number a double would change kept as a JSON string
// of its exact digits: a number with a fraction or an exponent ("0.10",
// "12345678901234567.89", "1e400") and an integer beyond 64 bits.  Integers
// that fit 64 bits stay integers.  E.g.
// exact_numbers(change.current_json).at("amount").as_string() == "0.10".
// Throws boost::system::system_error for text that is not JSON.
boost::json::value exact_numbers(std::string_view json);
// The operation `name` names (to_string()'s inverse, read()'s operation column); none for another text.
std::optional<Operation> operation_named(const std::string& name) noexcept;

// On the all-versions feed `current` and `previous` are JSON null exactly when
// the version does not exist or was not kept: a create has no previous, a
// delete no current, and a replace or delete carries a previous only when the
// collection keeps previous images.  A document is never null itself (it is a
// row), so null always means "absent" -- never an empty stand-in document.
struct Change {
    Operation operation = Operation::create;
    std::string doc_id;         // primary key as text, a JSON array of texts for a composite key
    std::string partition_key;  // partition-key text (components joined by '/')
    int range_id = 0;
    boost::json::value current;  // the row after the write; null for delete/clear
    // The row before: on the all-versions feed the version this write
    // replaced, if the collection keeps previous images.  The latest-version
    // feed fills it too, from the same log row: the version before the last
    // write, which the consumer may never have seen (a create and a replace
    // between two reads arrive as one replace); use it there only as "what
    // this write changed", never as "what I was given last".
    boost::json::value previous;
    // The documents exactly as PostgreSQL wrote them (jsonb's text), empty
    // where the document is absent.  `current` and `previous` hold them parsed,
    // where a number with a fraction or an exponent is a double: numeric 0.10
    // reads 0.1 and 12345678901234567.89 loses digits.  For money and other
    // exact numbers read these texts, or exact_numbers(current_json).  The
    // bridge's envelopes and the CLI write these texts as they are.  (In memory
    // they are the given documents, serialized.)
    std::string current_json;
    std::string previous_json;
    bool ttl_expired = false;  // a delete made by the TTL sweeper
    std::optional<std::string> tenant;
    // Server time of the write (the writing transaction's start, microseconds);
    // none for rows of a backfill.
    std::optional<std::chrono::system_clock::time_point> written_at;
    std::int64_t seq = 0;  // log sequence number; 0 for rows of a backfill
    // The writing transaction (xid8).  Changes of one transaction share it and
    // commit together: it names the change's commit window.  0 for backfill rows.
    std::uint64_t txid = 0;
    bool from_backfill = false;  // read from the table by start_from_beginning, not from the log
    // The change's identity, the same on every redelivery and every instance:
    // "<collection id>.<txid>.<seq>" for a change read from the log (read()'s
    // event_id); for a backfill row "<collection id>.b<backfill>.<doc_id>",
    // where <backfill> names the backfill (a resync starts a new one).
    std::string event_id;

    bool has_current() const noexcept { return !current.is_null(); }
    bool has_previous() const noexcept { return !previous.is_null(); }

    // Typed access to the current document, e.g. change.as<User>().
    template <class T>
    T as() const;
};

}  // namespace changefeed

#include <boost/json/value_to.hpp>

template <class T>
T changefeed::Change::as() const {
    return boost::json::value_to<T>(current);
}
