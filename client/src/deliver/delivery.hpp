// Internal: hands a batch of one range (a log batch or a backfill page) to the
// processor's handler in whichever of its three shapes, and stores the
// checkpoint the way that shape needs it:
//   Handler               the handler, then the fenced checkpoint -- or, with
//                         CheckpointMode::manual, none: Context::checkpoint
//                         stores it when the service says so
//   Projector             a transaction fenced from its start (the lease
//                         row locked): one dedup_applied() call for the
//                         batch, the projector for the changes not recorded,
//                         one dedup_record() for those it was called for
//                         (also after it threw; kept and recorded on the next
//                         connection when the record failed), the
//                         checkpoint, one commit
//   TransactionalHandler  a transaction on the worker's connection: the
//                         handler's writes, the fenced checkpoint, one commit
// The range worker decides what to read and keeps each range's state; every
// call of user code goes through its handler-failure policy (Guard).
#pragma once

#include "deliver/projection_policy.hpp"
#include "lease/lease_store.hpp"
#include "read/feed_mode.hpp"
#include "supervise/consumer_policy.hpp"

#include <changefeed/handler.hpp>
#include <changefeed/processor_options.hpp>
#include <changefeed/projection.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <stop_token>
#include <string>
#include <vector>

namespace changefeed::detail {

// Where a range stands after a batch: what its checkpoint stores.
struct Mark {
    std::string position;   // a log batch: the position after it
    bool backfill = false;  // a backfill page: the scan's progress instead
    std::optional<std::string> backfill_after;
    std::int64_t backfill_rows = 0;
    bool backfill_done = false;
};

// Context::checkpoint of CheckpointMode::manual: stores a batch's mark, fenced
// by the range's epoch at delivery, on a connection of its own (opened on
// first use; calls may come from any thread, after the handler returned).
// A mark older than one already stored for the range is ignored.
class ManualCheckpoints : public std::enable_shared_from_this<ManualCheckpoints> {
public:
    ManualCheckpoints(std::string conninfo, LeaseKey key) : conninfo_(std::move(conninfo)), key_(std::move(key)) {}
    // The closure for a batch delivered now.
    std::function<void()> bind(int range, std::int64_t epoch, Mark mark);

private:
    void store(int range, std::int64_t epoch, std::uint64_t order, const Mark& mark);

    const std::string conninfo_;
    const LeaseKey key_;
    std::mutex mu_;  // one call at a time on the connection; guards the maps
    std::unique_ptr<pqxx::connection> conn_;
    std::map<int, std::uint64_t> delivered_;  // per range: order of the last batch bound
    std::map<int, std::uint64_t> stored_;     // per range: order of the last batch stored
};

// One batch for Delivery::deliver: its changes, the handler's Context
// (Context::position, stop and checkpoint are filled in delivery), the
// range's epoch, where the range stands before it (a projector's fence
// stores that again at the batch's start) and after it (the checkpoint).
// With `deferred`, a log batch's checkpoint (Handler and Projector shapes,
// automatic mode) is appended there instead, for the caller to store with
// the round's others in one call (checkpoint_many, after before_checkpoint);
// a TransactionalHandler's is always committed with its writes.
struct BatchDelivery {
    const std::vector<Change>& changes;
    Context ctx;
    std::int64_t epoch = 0;
    const Mark& before;
    const Mark& after;
    std::stop_token stop;  // the handler's stop token
    std::vector<PendingCheckpoint>* deferred = nullptr;
};

class Delivery {
public:
    // Runs user code under the range worker's handler-failure policy;
    // returns false when it threw (reported there, retried later).
    using Guard = std::function<bool(const std::function<void()>& user_code)>;

    // `before_checkpoint`: FeedSettings::before_checkpoint (may be empty).
    Delivery(std::string conninfo, LeaseKey key, const ProcessorHandler& handler, const ProcessorOptions& options,
             ConsumerEvents& events, std::shared_ptr<ProjectionCounters> counters,
             std::function<bool(std::stop_token)> before_checkpoint = {});

    // Hands `batch.changes` (not empty) to the handler and stores
    // `batch.after` as the checkpoint unless the mode is manual (or defers
    // it, see BatchDelivery).  Returns false when the handler failed, or
    // before_checkpoint refused (stopping): nothing stored, the batch is to
    // be read again.  Throws Error(lease_lost) when the lease changed hands
    // (a transactional handler's writes are then rolled back), other Errors
    // for the connection.
    bool deliver(pqxx::connection& conn, BatchDelivery batch, const Guard& guard);
    // Stores a mark without a batch (an empty backfill page).  Manual mode:
    // nothing (the next Context::checkpoint covers it).
    void store(pqxx::connection& conn, int range, std::int64_t epoch, const Mark& after);
    // Whether the worker stores checkpoints itself (not in manual mode).
    bool automatic() const { return options_.checkpoint_mode == CheckpointMode::automatic; }
    // Whether a batch's checkpoint goes to the lease thread (a Handler's);
    // a Projector and a TransactionalHandler commit theirs with the batch.
    bool defers_checkpoints() const;
    // A projector's: records the ids of changes it applied whose record
    // failed with the connection (kept since).  The worker calls it on a new
    // connection before it reads again; throws like any statement.
    void flush_unrecorded(pqxx::connection& conn);
    bool has_unrecorded() const { return !unrecorded_.empty(); }

private:
    bool hand_over(pqxx::connection& conn, BatchDelivery& batch, const Guard& guard, std::int64_t& duplicates);
    bool project(pqxx::connection& conn, const BatchDelivery& batch, const Guard& guard, std::int64_t& duplicates);
    bool transact(pqxx::connection& conn, const BatchDelivery& batch, const Guard& guard);

    const std::string conninfo_;
    const LeaseKey key_;
    const ProcessorHandler& handler_;
    const ProcessorOptions& options_;
    ConsumerEvents& events_;
    std::shared_ptr<ProjectionCounters> counters_;
    const std::function<bool(std::stop_token)> before_checkpoint_;
    std::shared_ptr<ManualCheckpoints> manual_;
    // A projector's applied changes not yet in the dedup store (their record
    // failed); the worker thread's own.
    std::vector<std::string> unrecorded_;
};

// "<collection id>.b<16 hex digits>.": the event-id prefix of the rows of the
// backfill that continues the log from `backfill_position` (FNV-1a 64 of it):
// a resync starts a backfill at a new position, so its rows get new ids.
std::string backfill_event_prefix(int collection_id, const std::string& backfill_position);

}  // namespace changefeed::detail
