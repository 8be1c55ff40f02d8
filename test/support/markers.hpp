// Checks that something was NOT delivered prove it by an event, not by a
// pause: a marker change written after it in every range, awaited until
// handled.  A range is read in order, so whatever was written into it before
// its marker (and any redelivery of it) would have come first.
#pragma once

#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace cftest {

// Writes one marker row (id, v) = (n, 'marker') into every range of `table`
// (a create_table() table; ids from `first_id` on, one per range) and waits
// until `rec` handled all of them.  Returns the marker ids, or none if they
// were not all handled within `timeout` (scaled).
std::vector<std::string> deliver_markers(Cluster& c, const std::string& table, int first_id, const Recorder& rec,
                                         std::chrono::milliseconds timeout = std::chrono::seconds(30));
// The same for a consumer that records on its own: `handled(id)` tells
// whether the change of doc id `id` was handled.
std::vector<std::string> deliver_markers(Cluster& c, const std::string& table, int first_id,
                                         const std::function<bool(const std::string&)>& handled,
                                         std::chrono::milliseconds timeout = std::chrono::seconds(30));
// Whether a change is one of deliver_markers() (its v is 'marker').
bool is_marker(const changefeed::Change& change);

// For a processor that must stay silent (halted): a witness processor of
// `table`, started at now, is sent `rounds` rounds of markers (ids from
// `first_id` on), each awaited before the next.  Every marker is a wake-up and
// a read the silent processor had too.  Returns whether the witness handled
// them all.
bool witness_rounds(Cluster& c, const std::string& table, int first_id, int rounds = 3);

}  // namespace cftest
