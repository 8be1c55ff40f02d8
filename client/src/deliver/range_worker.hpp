// Internal: the worker of a PostgreSQL processor.  On the processor's worker
// thread it reads the ranges this instance holds leases on (a snapshot of the
// lease keeper's view), hands batches to the handler, has the lease thread
// store the fenced checkpoints, runs start_from_beginning backfills, and handles a lost
// history (halt, or resync from the table).  It keeps each range's state.
// With the read_connection option the log is read from a standby on a
// connection of its own; everything else stays on the primary's.
#pragma once

#include <changefeed/collection.hpp>

#include "deliver/delivery.hpp"
#include "lease/lease_keeper.hpp"
#include "lease/lease_store.hpp"
#include "read/feed_mode.hpp"
#include "read/feed_reader.hpp"
#include "read/read_ahead.hpp"
#include "supervise/consumer_policy.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <pqxx/pqxx>
#include <set>
#include <stop_token>
#include <string>
#include <vector>

namespace changefeed::detail {

// What the worker reads and for whom; fixed for one start().
struct WorkerSetup {
    explicit WorkerSetup(Collection c) : collection(std::move(c)) {}
    Collection collection;
    CollectionInfo info;
    TenantScope scope;
    const FeedSettings* feed = nullptr;
    const ProcessorHandler* handler = nullptr;
    std::shared_ptr<ProjectionCounters> counters;  // a projector's
    std::string name;                              // as given
    std::string stored_name;                       // as on the server (with the tenant prefix)
    std::string instance;
    LeaseKey key;
    // Starts LISTENing for the worker (wake()): the long poll, the wake-up
    // otherwise, is not available.
    std::function<void()> listen;
};

class RangeWorker {
public:
    RangeWorker(WorkerSetup setup, ConsumerEvents& events, LeaseKeeper& leases);

    // Reads until request_stop(); stores where idle ranges got to on the way out.
    void run();
    // Read now (a notification).
    void wake();
    // Read now, the leases changed: a long poll waiting for a commit ends too.
    void leases_changed();
    // Signals the handler's stop token and ends run() after the running step.
    void request_stop();

private:
    using Clock = std::chrono::steady_clock;

    // What the worker keeps per owned range.
    struct RangeState {
        RangeLease lease;
        std::string persisted;  // the checkpoint as stored
        Clock::time_point last_persist;
        Clock::time_point retry_at;
        std::int64_t estimated = -1;
        bool lost = false;  // the lease changed hands: drop the range
    };

    // One pass over the ranges: who reads alone, who reads together.
    struct ReadPlan {
        std::vector<int> backfilling;  // each alone: a backfill reads the table, not the log
        std::vector<int> log;          // all in one read_ranges() call, whatever their positions
        Clock::time_point next_retry = Clock::time_point::max();
    };

    bool pass(pqxx::connection& conn, pqxx::connection& reader);
    ReadPlan plan() const;
    void pause(std::chrono::milliseconds d);
    void sync_ranges(pqxx::connection& conn, const std::map<int, std::int64_t>& owned_now);
    void maybe_maintain(pqxx::connection& conn);
    bool history_lost(pqxx::connection& conn, const Context& ctx, RangeState& st, const Error& e);
    void drop_lost();
    bool call_handler(const std::function<void()>& handler, const Context& ctx, RangeState& st);
    void handler_failed(int range, RangeState& st, std::exception_ptr p);
    template <class F>
    bool fenced(int range, RangeState& st, F&& store);
    bool step(pqxx::connection& conn, int range, RangeState& st);
    bool log_round(pqxx::connection& conn, pqxx::connection& reader, const std::vector<int>& group);
    bool reads_standby() const { return !opt_.read_connection.empty(); }
    std::chrono::milliseconds long_poll_wait() const;
    bool long_poll_worth() const;
    std::optional<MultiReadResult> long_poll(pqxx::connection& conn, const std::map<int, std::string>& since,
                                             int budget, std::chrono::milliseconds wait);
    void interrupt_long_poll();
    void listen_instead();
    bool deliver_in_batches(pqxx::connection& conn, int range, RangeState& st, std::vector<Change>& changes,
                            const std::vector<std::string>& positions, const std::string& resume_at,
                            std::vector<PendingCheckpoint>& pending);
    static void keep_last_pending(std::vector<PendingCheckpoint>& pending, std::size_t from, int range);
    bool deliver(pqxx::connection& conn, const Context& ctx, RangeState& st, const std::vector<Change>& batch,
                 const std::string& position, std::vector<PendingCheckpoint>* pending = nullptr);
    void advance_idle(pqxx::connection& conn, int range, RangeState& st, const std::string& position,
                      std::vector<PendingCheckpoint>* pending = nullptr);
    void store_pending(const std::vector<PendingCheckpoint>& pending);
    void take_checkpoint_outcome();
    bool backfill_step(pqxx::connection& conn, const Context& ctx, RangeState& st);
    void store_idle_positions();
    Context context_of(int range, const RangeState& st) const;

    const WorkerSetup s_;
    const ProcessorOptions& opt_;
    ConsumerEvents& events_;
    LeaseKeeper& leases_;
    Delivery delivery_;
    ReadAhead read_ahead_;  // the next read, while the handler runs

    std::mutex mu_;  // guards wake_, stopping_, polling_ and leases_moved_
    std::condition_variable cv_;
    bool wake_ = true;
    bool stopping_ = false;
    pqxx::connection* polling_ = nullptr;  // the worker's connection while a long poll waits on it
    bool leases_moved_ = false;            // since the last long poll began
    std::stop_source stop_source_;         // the handler's stop token

    // The worker thread's own.
    LeaseView view_;                    // the lease thread's, as last looked at
    std::uint64_t synced_version_ = 0;  // the view's version ranges_ follows (0: none)
    std::map<int, RangeState> ranges_;
    std::set<int> halted_;         // by the recovery policy; kept across reconnects
    std::map<int, int> failures_;  // the handler's failures in a row, per range
    Clock::time_point next_maintain_{};
    bool maintain_denied_told_ = false;
    // A caught-up worker's next read waits in the server for a commit
    // (read_ranges(..., wait)) on the worker's connection: that wait is the
    // wake-up, and no connection LISTENs while it works.
    int long_poll_ = -1;  // whether the server takes it: -1 not asked yet
    bool listening_ = false;
    std::chrono::milliseconds wait_next_{0};
};

}  // namespace changefeed::detail
