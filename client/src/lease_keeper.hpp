// Internal: the lease thread of a PostgreSQL processor.  It acquires,
// balances and renews this instance's leases, owns the view of which ranges
// it holds, hands out snapshots of that view to the range worker, and
// releases the leases when the processor stops.
#pragma once

#include "consumer_policy.hpp"
#include "lease_store.hpp"

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
    std::map<int, std::int64_t> owned;  // range -> epoch
    std::chrono::steady_clock::time_point valid_until{};  // the last renewal's expiry
    bool acquired_once = false;  // an acquire has answered since start
};

class LeaseKeeper {
public:
    struct Hooks {
        std::function<void()> changed;  // the set of owned ranges changed
        // The recovery policy halted the processor (the table dropped or
        // disabled, the leases another role's; already reported): stop it.
        std::function<void()> collection_gone;
    };

    LeaseKeeper(std::string conninfo, LeaseKey key, const ProcessorOptions& options, ConsumerEvents& events,
                Hooks hooks);
    ~LeaseKeeper();

    // Starts the lease thread on `conn` (it reconnects on its own).
    void start(std::unique_ptr<pqxx::connection> conn);
    // Stops acquiring; the leases are still renewed until release(), so that
    // the worker's last checkpoints stay fenced.
    void stop_acquiring();
    // The worker is done: release the leases (so that another instance takes
    // over without waiting for the expiry) and end the thread.
    void release();

    LeaseView snapshot() const;
    // The worker found the lease of `range` lost at `epoch`: stop counting it.
    void forget(int range, std::int64_t epoch);
    std::vector<int> owned_ranges() const;

private:
    using Clock = std::chrono::steady_clock;
    void run(std::unique_ptr<pqxx::connection> conn);
    void publish(std::map<int, std::int64_t> got, std::optional<Clock::time_point> valid_until);
    void keep_until_released(std::unique_ptr<pqxx::connection>& conn);

    const std::string conninfo_;
    const LeaseKey key_;
    const ProcessorOptions& opt_;
    ConsumerEvents& events_;
    const Hooks hooks_;

    mutable std::mutex mu_;  // guards what follows
    std::condition_variable cv_;
    LeaseView view_;
    bool stopping_ = false;
    bool released_ = false;

    std::jthread thread_;
};

}  // namespace changefeed::detail
