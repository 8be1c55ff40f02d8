#include "lease_keeper.hpp"

#include "db.hpp"

namespace changefeed::detail {

LeaseKeeper::LeaseKeeper(std::string conninfo, LeaseKey key, const ProcessorOptions& options,
                         ConsumerEvents& events, Hooks hooks)
    : conninfo_(std::move(conninfo)), key_(std::move(key)), opt_(options), events_(events), hooks_(std::move(hooks)) {}

LeaseKeeper::~LeaseKeeper() {
    stop_acquiring();
    release();
}

void LeaseKeeper::start(std::unique_ptr<pqxx::connection> conn) {
    thread_ = std::jthread([this, c = std::move(conn)]() mutable { run(std::move(c)); });
}

void LeaseKeeper::stop_acquiring() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
}

void LeaseKeeper::release() {
    {
        std::lock_guard lock(mu_);
        released_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mu_);
    view_.owned.clear();
}

LeaseView LeaseKeeper::snapshot() const {
    std::lock_guard lock(mu_);
    return view_;
}

void LeaseKeeper::forget(int range, std::int64_t epoch) {
    std::lock_guard lock(mu_);
    auto o = view_.owned.find(range);
    if (o != view_.owned.end() && o->second == epoch) view_.owned.erase(o);
}

std::vector<int> LeaseKeeper::owned_ranges() const {
    std::lock_guard lock(mu_);
    std::vector<int> out;
    for (const auto& [range, epoch] : view_.owned) out.push_back(range);
    return out;
}

void LeaseKeeper::run(std::unique_ptr<pqxx::connection> conn) {
    auto next_acquire = Clock::now();
    auto next_renew = Clock::now();
    Backoff backoff(opt_.reconnect_min, opt_.reconnect_max);
    for (;;) {
        {
            std::lock_guard lock(mu_);
            if (stopping_) break;
        }
        try {
            if (!conn) conn = connect(conninfo_);
            auto now = Clock::now();
            if (now >= next_acquire) {
                publish(acquire_leases(*conn, key_, opt_.lease_duration), std::nullopt);
                next_acquire = now + opt_.acquire_interval;
            }
            now = Clock::now();
            if (now >= next_renew) {
                auto got = renew_leases(*conn, key_, opt_.lease_duration);
                // Valid from when the renewal was sent, not when it answered.
                publish(std::move(got), now + opt_.lease_duration);
                next_renew = now + opt_.renew_interval;
            }
            backoff.reset();
        } catch (...) {
            Error e = to_error(std::current_exception());
            const auto situation = processor_situation(e);
            if (situation && *situation != Situation::connection_lost) {
                // Dropped or disabled, or the leases are another role's: the policy decides, as in the worker.
                const RecoveryDecision d = events_.decide(Incident{*situation, std::nullopt, e.code(), e.what(), 0});
                if (d.halts()) {
                    events_.report_decided(std::nullopt, e, std::current_exception(), d);
                    {
                        std::lock_guard lock(mu_);
                        stopping_ = true;
                    }
                    if (hooks_.collection_gone) hooks_.collection_gone();
                    break;
                }
            }
            if (!is_connection_error(e)) events_.report(std::nullopt, e, std::current_exception());
            conn.reset();
            std::unique_lock lock(mu_);
            cv_.wait_for(lock, backoff.next(), [&] { return stopping_; });
            continue;
        }
        std::unique_lock lock(mu_);
        cv_.wait_until(lock, std::min(next_acquire, next_renew), [&] { return stopping_; });
    }
    keep_until_released(conn);
    for (int attempt = 0; attempt < 3; ++attempt) {
        try {
            if (!conn) conn = connect(conninfo_);
            release_leases(*conn, key_);
            return;
        } catch (...) {
            conn.reset();  // the leases expire on their own if the server stays away
        }
    }
}

// Renews, without acquiring, until the worker is done.
void LeaseKeeper::keep_until_released(std::unique_ptr<pqxx::connection>& conn) {
    std::unique_lock lock(mu_);
    while (!released_) {
        lock.unlock();
        try {
            if (!conn) conn = connect(conninfo_);
            (void)renew_leases(*conn, key_, opt_.lease_duration);
        } catch (...) {
            conn.reset();
        }
        lock.lock();
        cv_.wait_for(lock, opt_.renew_interval, [&] { return released_; });
    }
}

void LeaseKeeper::publish(std::map<int, std::int64_t> got, std::optional<Clock::time_point> valid_until) {
    bool changed;
    {
        std::lock_guard lock(mu_);
        // The first answer counts as a change too: the worker waits for it.
        changed = got != view_.owned || !view_.acquired_once;
        view_.owned = std::move(got);
        if (valid_until) view_.valid_until = *valid_until;
        view_.acquired_once = true;
    }
    if (changed && hooks_.changed) hooks_.changed();
}

}  // namespace changefeed::detail
