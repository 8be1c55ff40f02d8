// The table as of a position and the net change between two positions
// (changefeed.as_of() and changefeed.diff(), docs/options.md), on both
// providers: audits, seeding a projection from a consistent base before
// reading the feed from the same position, debugging a consumer where it
// stopped.
#pragma once
#include <changefeed/change.hpp>
#include <changefeed/collection.hpp>

#include <boost/json/value.hpp>
#include <string>
#include <vector>

namespace changefeed {

class InMemoryCollection;

// One document of the table at a position.
struct Document {
    std::string doc_id;           // as changes carry it
    boost::json::value document;  // parsed: a number with a fraction is a double (see Change)
    std::string document_json;    // the text as PostgreSQL wrote it (in memory: serialized)
};

// One document's net change between two positions: a create (current only),
// a delete (previous only) or a replace (both).
struct NetChange {
    Operation operation = Operation::replace;
    std::string doc_id;
    boost::json::value current;   // at the later position; null for a delete
    boost::json::value previous;  // at the earlier position; null for a create
    std::string current_json, previous_json;
    std::vector<std::string> event_ids;  // the changes it sums up, in order (Change::event_id)
};

// changefeed.current_position(): the position of everything committed now.
std::string current_position(const Collection& collection);

// The documents of the table at `position`, read in one statement with the
// connecting role's rights: the table now with every change after the
// position undone.  No order.  Throws Error: history_lost past retention,
// cannot_rebuild when the log cannot undo what followed (a TRUNCATE after the
// position, or a change logged without the image before it),
// position_ahead for a position newer than the reading snapshot,
// images_not_logged for a collection that logs keys alone, malformed_position,
// foreign_position, other_history, permission_denied.
std::vector<Document> as_of(const Collection& collection, const std::string& position);

// What changed between `since` and `upto` (upto at or after since, else
// invalid_option), per document, in doc_id order; documents back to their
// image at `since` are left out.  Errors as as_of().
std::vector<NetChange> diff(const Collection& collection, const std::string& since, const std::string& upto);

// The same on the in-memory provider, from its log (kept from the first
// processor start on, or from InMemoryOptions::record_from_start): a position
// from before the log began is history_lost; a clear() after the position is
// cannot_rebuild, as is a change after it when keep_previous is off.
std::vector<Document> as_of(const InMemoryCollection& collection, const std::string& position);
std::vector<NetChange> diff(const InMemoryCollection& collection, const std::string& since, const std::string& upto);

}  // namespace changefeed
