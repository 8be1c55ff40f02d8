// Documents written exactly as PostgreSQL wrote them into JSON built from a
// Change: a slot in the value stands for a document's text, and the slots are
// replaced by the texts after serializing.
#pragma once

#include <changefeed/change.hpp>

#include <boost/json/value.hpp>

#include <string>

namespace changefeed::detail {

// The value to put where `change`'s current (or previous) document goes: a
// slot when the change carries the document's text, else the parsed value.
boost::json::value current_slot(const Change& change);
boost::json::value previous_slot(const Change& change);

// `v` serialized, its slots replaced by `change`'s document texts.
std::string serialize_exact(const boost::json::value& v, const Change& change);

}  // namespace changefeed::detail
