// What a processor's handler is given (Context) and the shapes it takes.
#pragma once

#include <changefeed/change.hpp>
#include <changefeed/projection.hpp>

#include <cstdint>
#include <functional>
#include <stop_token>
#include <string>
#include <variant>
#include <vector>

namespace changefeed {

// What the handler is told about a batch.
struct Context {
    int range_id = 0;              // the range the batch comes from: the scope of the ordering
    std::string processor;         // the processor name as given (without the tenant prefix)
    std::string instance;          // this instance's name
    std::int64_t lease_epoch = 0;  // always 1 on the in-memory provider (no leases)
    // The range as text: the range id on PostgreSQL; on the in-memory provider
    // the partition key value (components joined by '/'), whose range_id is
    // a number given in order of first appearance.
    std::string range;
    // The position after this batch: what an automatic checkpoint stores,
    // what a manual one may store (see CheckpointMode).  Empty for a backfill page.
    std::string position;
    // CheckpointMode::manual only (empty otherwise): stores `position` as the
    // range's checkpoint (for a backfill page: the scan's progress), fenced
    // by the lease at the batch's epoch (Error(lease_lost) if the range
    // changed hands).  Callable from any thread, during or after the handler,
    // while the processor runs, on a connection of its own; a position older
    // than one this instance already stored for the range is ignored.
    std::function<void()> checkpoint;
    // Signalled when the processor (or the subscription) stops, so that a
    // long handler can return early.
    std::stop_token stop;
};

// The handler shapes all take the Context last: Handler(batch, context),
// Projector(change, context), TransactionalHandler(batch, transaction, context)
// (projection.hpp), and a subscription's ChangeCallback(change, context).
using Handler = std::function<void(const std::vector<Change>& batch, const Context& context)>;

// What a processor runs: one of the three shapes.  A lambda converts to the
// shape its parameters say (a generic lambda fits several: give it a type).
using ProcessorHandler = std::variant<Handler, Projector, TransactionalHandler>;

}  // namespace changefeed
