// The two handler shapes beside Handler that make a projection right on its
// first restart:
//
// Projector -- at least once, deduplicated.  Called once per change; returns
// whether it applied it or found it already applied.  The processor keeps the
// event ids of applied changes in a deduplication store in the feed's
// database (changefeed.applied, pruned with the log's retention) and does not
// call the projector again for a change recorded there, however often the
// change is redelivered.  The ids are recorded after the projector returned
// and before the checkpoint, and also for the changes a batch applied before
// the projector threw on a later one.  A batch runs in one transaction that
// holds its lease's fence from the start, so an instance taking the range
// over (balancing, an expired lease) waits for the record and skips what was
// applied.  A record that fails because the connection broke (a server
// restart, a failover, a terminated backend) is kept in memory and made on
// the next connection before anything is read again, so a connection blip
// re-applies nothing.  What can be applied twice is only what was applied and
// not yet recorded when the process died, or froze past its lease (its
// transaction ends after lease_duration idle and the range moves): a
// projector must still be idempotent, but duplicates stay rare and are counted.
//
//   auto p = changefeed::make_processor(orders, "order-totals",
//       [&](const changefeed::Change& c, const changefeed::Context&) {
//           totals.apply(c);  // idempotent: keyed by c.doc_id
//           return changefeed::ProjectionResult::applied;
//       });
//
// TransactionalHandler -- exactly once into the feed's own database.  The
// handler gets an open transaction; it writes its projection there, the
// processor stores the batch's checkpoint in the same transaction (fenced by
// the lease) and commits.  The projection's writes and the checkpoint commit
// together or not at all, so no change is ever applied twice or lost.
//
//   auto p = changefeed::make_processor(orders, "order-copy",
//       [](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
//          const changefeed::Context&) {
//           for (const auto& c : batch) tx.sql().exec_params("...", c.doc_id);
//       });
#pragma once

#include <changefeed/change.hpp>

#include <cstdint>
#include <functional>
#include <vector>

namespace pqxx {
class transaction_base;
}

namespace changefeed {

struct Context;
class InMemoryTransaction;

// What a projector did with one change.
enum class ProjectionResult {
    applied,            // the projection now reflects the change
    skipped_duplicate,  // it already did (the projector's own check, e.g. a version compare)
};

using Projector = std::function<ProjectionResult(const Change& change, const Context& context)>;

// Counters of a projector processor since its start.
struct ProjectionStats {
    std::int64_t applied = 0;
    // Skipped because the deduplication store had the event id, or because
    // the projector said so.
    std::int64_t skipped_duplicate = 0;
};

// The open transaction a TransactionalHandler writes its projection in.
class Transaction {
public:
    virtual ~Transaction() = default;
    // PostgreSQL: the transaction on the feed's database (READ COMMITTED).
    // Do not commit or abort it: the processor does.  Throws
    // Error(invalid_option) on the in-memory provider.
    virtual pqxx::transaction_base& sql() = 0;
    // The in-memory provider's transaction.  Throws Error(invalid_option) on PostgreSQL.
    virtual InMemoryTransaction& memory() = 0;
};

using TransactionalHandler =
    std::function<void(const std::vector<Change>& batch, Transaction& transaction, const Context& context)>;

}  // namespace changefeed
