// What a subscription is made with: its options and its callback's shape.
#pragma once

#include <changefeed/change.hpp>
#include <changefeed/error.hpp>
#include <changefeed/filter.hpp>
#include <changefeed/handler.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace changefeed {

struct SubscriptionOptions {
    // Only changes whose document matches (subscription.hpp says how deletes and clears pass).
    std::optional<Predicate> filter;
    // The filter as a view: a replace that makes the document match where it
    // did not arrives as a create (current only), one that makes it stop
    // matching as a delete (previous only), one that matches before and after
    // as a replace (needs previous images; without them a replace is tested
    // on the document after).  False: a replace is delivered when the
    // document after matches, as a replace.
    bool filter_moves = true;
    // Only this document's changes (a clear passes too).  Set by watch().
    std::optional<std::string> document_id;
    // Only this tenant's changes (a clear passes too), with partition keys
    // without the tenant prefix, as a tenant-scoped processor sees them.  The
    // collection needs a tenant column (invalid_option otherwise).  Empty: all
    // (a role bound to a tenant still sees only its tenant's changes).
    std::string tenant;
    // Deliver the table's schema changes too: one Change of Operation::schema
    // per change of shape (change.hpp), in order with the data.
    bool schema_changes = false;
    // Fallback read interval when no notification arrives.
    std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};
    // Most changes waiting for a slow consumer; reading pauses above it (nothing is dropped).
    std::size_t max_buffered = 10000;
    // Failures: connection losses (retried), a callback that threw (handler_failed; the
    // change is not delivered again), and what ends the subscription (collection dropped
    // or disabled, history lost).
    std::function<void(const ErrorInfo&)> on_error;
};

// A subscription delivers the processors' Change (change.hpp): `current` is
// the whole row after the write (null for delete and clear), `previous` the
// row before when the collection keeps it, `doc_id` empty for a clear;
// `from_backfill` is always false (nothing is replayed).  A callback's
// Context: range_id and range (the range the change comes from), and stop
// (signalled on cancel); the processor's fields are empty.
using ChangeCallback = std::function<void(const Change& change, const Context& context)>;

}  // namespace changefeed
