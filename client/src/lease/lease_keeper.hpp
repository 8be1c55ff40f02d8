// Internal: the lease thread of a PostgreSQL processor.  It holds this
// instance's name (registered for its connection, again after every
// reconnect), acquires, balances and renews the instance's leases, owns the
// view of which ranges it holds (telling on_lease_acquired/released when it
// changes), hands out snapshots of that view to the range worker, and
// releases the leases and the name when the processor stops.
#pragma once

#include <changefeed/processor_options.hpp>

#include "lease/lease_session.hpp"
#include "lease/lease_store.hpp"
#include "supervise/consumer_policy.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

namespace changefeed::detail {

// What the lease thread last saw.
struct LeaseView {
    std::map<int, std::int64_t> owned;                    // range -> epoch
    std::chrono::steady_clock::time_point valid_until{};  // the last renewal's expiry
    bool acquired_once = false;                           // an acquire has answered since start
    std::uint64_t version = 0;                            // moves whenever `owned` changes
};

class LeaseKeeper {
public:
    struct Hooks {
        // The set of owned ranges changed, or a renewal made the view valid
        // (the worker reads only while it is).
        std::function<void()> changed;
        // Already reported through on_error: the recovery policy halted the
        // processor (the table dropped or disabled, the leases another role's),
        // or another instance took this instance's name while the connection
        // was down.  Stop the processor.
        std::function<void()> halt;
    };

    // `token`: this start's own, registered with the name (register_instance).
    LeaseKeeper(std::string conninfo, LeaseKey key, std::string token, const ProcessorOptions& options,
                ConsumerEvents& events, Hooks hooks);
    ~LeaseKeeper();

    // Starts the lease thread.  The name is registered under `token` on
    // `conn` already; `conn` becomes the shared lease session's connection
    // if it has none (lease_session.hpp), else the name is registered again
    // on the session's, as after every reconnect.
    void start(std::unique_ptr<pqxx::connection> conn);
    // Stops acquiring; the leases are still renewed until release(), so that
    // the worker's last checkpoints stay fenced.
    void stop_acquiring();
    // The worker is done: release the leases (so that another instance takes
    // over without waiting for the expiry) and end the thread.
    void release();

    LeaseView snapshot() const;
    // Brings `view` up to date, copying the owned ranges only when they
    // changed since `view` was taken: an idle worker's pass does not copy them.
    void refresh_view(LeaseView& view) const;
    // The worker found the lease of `range` lost at `epoch`: stop counting it.
    void forget(int range, std::int64_t epoch);
    // The worker found the view stale (it read a range the collection no
    // longer has: its ranges changed, and the leases with them): renew and
    // acquire now instead of at the next interval.
    void refresh();
    std::vector<int> owned_ranges() const;

    // The worker's checkpoints of a round, stored by the lease thread on its
    // connection while the worker reads on: a wake-up does not wait for the
    // previous round's checkpoint.  Stored in the order handed over.
    void store_checkpoints(std::vector<PendingCheckpoint> marks);
    // What became of the checkpoints handed over since the last call.
    struct CheckpointOutcome {
        std::vector<PendingCheckpoint> stored;
        std::vector<PendingCheckpoint> lost;  // the lease changed hands (CF010)
        bool failed = false;                  // refused for another reason (reported): read from the stored ones
    };
    CheckpointOutcome checkpoint_outcome();
    // Waits up to `limit` until every checkpoint handed over is stored or
    // refused; whether they all were.
    bool flush_checkpoints(std::chrono::milliseconds limit);

private:
    using Clock = std::chrono::steady_clock;
    void run();
    void publish(std::map<int, std::int64_t> got, std::optional<Clock::time_point> valid_until);
    void extend(Clock::time_point valid_until);
    void keep_until_released();
    // Registers the name on a connection it is not registered on yet; true
    // when it did (the connection is new).
    bool ensure_registered(pqxx::connection& conn, std::uint64_t generation);
    // Tells on_lease_acquired / on_lease_released (what they throw is dropped)
    // and the telemetry: `released` were lost (taken over, expired) or given up.
    void tell(const std::vector<int>& acquired, const std::vector<int>& released, bool lost) const;
    // Stores what the worker handed over (a connection error leaves it queued).
    void write_checkpoints(pqxx::connection& conn);

    const std::string conninfo_;
    const LeaseKey key_;
    const std::string token_;
    const ProcessorOptions& opt_;
    ConsumerEvents& events_;
    const Hooks hooks_;
    const std::shared_ptr<LeaseSession> session_;
    std::uint64_t registered_on_ = 0;  // the session's generation the name is registered on (lease thread's)

    mutable std::mutex mu_;  // guards what follows
    std::condition_variable cv_;
    LeaseView view_;
    bool stopping_ = false;
    bool released_ = false;
    bool name_lost_ = false;                 // another instance holds our name: leave its leases alone
    bool refresh_ = false;                   // renew and acquire at once (refresh())
    std::vector<PendingCheckpoint> queued_;  // handed over, not stored yet
    // What a crash may read again at most, for a busy worker, beyond its last
    // round: one write of checkpoints per this much time instead of one per
    // round (each is a statement and a commit on the lease connection).
    static constexpr std::chrono::milliseconds kCheckpointPacing{50};
    Clock::time_point last_checkpoint_write_{};  // the lease thread's
    bool writing_ = false;                       // a batch of them is being stored
    CheckpointOutcome outcome_;

    std::jthread thread_;
};

}  // namespace changefeed::detail
