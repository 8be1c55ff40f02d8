#include "lease/lease_keeper.hpp"

#include "core/db.hpp"
#include "core/raise_flag.hpp"
#include "supervise/supervised_loop.hpp"

#include <algorithm>
#include <utility>

namespace changefeed::detail {

LeaseKeeper::LeaseKeeper(std::string conninfo, LeaseKey key, std::string token, const ProcessorOptions& options,
                         ConsumerEvents& events, Hooks hooks)
    : conninfo_(std::move(conninfo)), key_(std::move(key)), token_(std::move(token)), opt_(options), events_(events),
      hooks_(std::move(hooks)), session_(LeaseSession::of(conninfo_)) {}

LeaseKeeper::~LeaseKeeper() {
    stop_acquiring();
    release();
}

bool LeaseKeeper::ensure_registered(pqxx::connection& conn, std::uint64_t generation) {
    if (generation == registered_on_) return false;
    // The name belongs to a session: a new connection registers it again.
    register_instance(conn, key_, token_, opt_.lease_duration);
    registered_on_ = generation;
    events_.telemetry().connected(ConnectionRole::leases);
    return true;
}

void LeaseKeeper::start(std::unique_ptr<pqxx::connection> conn) {
    registered_on_ = session_->join(std::move(conn));
    thread_ = std::jthread([this] { run(); });
}

void LeaseKeeper::stop_acquiring() { raise_flag(mu_, cv_, stopping_); }

void LeaseKeeper::release() {
    raise_flag(mu_, cv_, released_);
    if (thread_.joinable()) thread_.join();
    std::vector<int> given_up;
    {
        std::lock_guard lock(mu_);
        for (const auto& [range, epoch] : view_.owned) given_up.push_back(range);
        view_.owned.clear();
        ++view_.version;
    }
    tell({}, given_up, false);
}

LeaseView LeaseKeeper::snapshot() const {
    std::lock_guard lock(mu_);
    return view_;
}

void LeaseKeeper::refresh_view(LeaseView& view) const {
    std::lock_guard lock(mu_);
    if (view.version != view_.version || view.owned.size() != view_.owned.size()) {
        view = view_;
        return;
    }
    view.valid_until = view_.valid_until;
    view.acquired_once = view_.acquired_once;
}

void LeaseKeeper::forget(int range, std::int64_t epoch) {
    {
        std::lock_guard lock(mu_);
        auto o = view_.owned.find(range);
        if (o == view_.owned.end() || o->second != epoch) return;
        view_.owned.erase(o);
        ++view_.version;
    }
    tell({}, {range}, true);
}

void LeaseKeeper::refresh() {
    {
        std::lock_guard lock(mu_);
        refresh_ = true;
    }
    cv_.notify_all();
}

std::vector<int> LeaseKeeper::owned_ranges() const {
    std::lock_guard lock(mu_);
    std::vector<int> out;
    for (const auto& [range, epoch] : view_.owned) out.push_back(range);
    return out;
}

void LeaseKeeper::store_checkpoints(std::vector<PendingCheckpoint> marks) {
    if (marks.empty()) return;
    {
        std::lock_guard lock(mu_);
        for (auto& m : marks) queued_.push_back(std::move(m));
    }
    cv_.notify_all();
}

LeaseKeeper::CheckpointOutcome LeaseKeeper::checkpoint_outcome() {
    std::lock_guard lock(mu_);
    return std::exchange(outcome_, CheckpointOutcome{});
}

bool LeaseKeeper::flush_checkpoints(std::chrono::milliseconds limit) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return queued_.empty() && !writing_; });
}

void LeaseKeeper::write_checkpoints(pqxx::connection& conn) {
    std::vector<PendingCheckpoint> batch;
    std::size_t taken = 0;
    {
        std::lock_guard lock(mu_);
        if (queued_.empty()) return;
        taken = queued_.size();
        // One row per range: the last handed over (a later round's, or a new epoch's).
        for (auto it = queued_.rbegin(); it != queued_.rend(); ++it) {
            const bool newer_kept = std::any_of(batch.begin(), batch.end(),
                                                [&](const PendingCheckpoint& m) { return m.range == it->range; });
            if (!newer_kept) batch.push_back(*it);
        }
        writing_ = true;
    }
    std::vector<int> lost;
    bool failed = false;
    last_checkpoint_write_ = Clock::now();
    try {
        lost = checkpoint_many(conn, key_, batch);
    } catch (...) {
        Error e = to_error(std::current_exception());
        if (is_connection_error(e)) {
            std::lock_guard lock(mu_);
            writing_ = false;
            throw e;  // queued still: stored after the reconnect
        }
        events_.report(std::nullopt, e, std::current_exception());
        failed = true;
    }
    {
        std::lock_guard lock(mu_);
        queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(taken));
        writing_ = false;
        outcome_.failed |= failed;
        for (auto& m : batch) {
            if (failed) continue;
            const bool fenced = std::find(lost.begin(), lost.end(), m.range) != lost.end();
            (fenced ? outcome_.lost : outcome_.stored).push_back(std::move(m));
        }
    }
    cv_.notify_all();
}

void LeaseKeeper::run() {
    struct Leave {
        LeaseSession& session;
        ~Leave() { session.leave(); }
    } leave{*session_};
    auto next_acquire = Clock::now();
    auto next_renew = Clock::now();
    SupervisedLoop loop(opt_.reconnect_min, opt_.reconnect_max, [this](std::chrono::milliseconds d) {
        std::unique_lock lock(mu_);
        return cv_.wait_for(lock, d, [&] { return stopping_; });
    });
    // The processor's lease generation our view is of: while it stays, the
    // server answers "unchanged" instead of listing every lease again.
    std::optional<std::int64_t> known;
    // Stopping, or else a refresh asked for: acquire and renew now.
    auto stopping = [&] {
        std::lock_guard lock(mu_);
        if (stopping_) return true;
        if (refresh_) {
            next_acquire = next_renew = Clock::now();
            known.reset();
        }
        refresh_ = false;
        return false;
    };
    auto round = [&] {
        session_->use([&](pqxx::connection& conn, std::uint64_t generation) {
            if (ensure_registered(conn, generation)) known.reset();
            write_checkpoints(conn);
            auto now = Clock::now();
            if (now >= next_acquire) {
                LeaseAnswer a = acquire_leases(conn, key_, opt_.lease_duration, known);
                if (a.owned) publish(std::move(*a.owned), std::nullopt);
                known = a.generation;
                next_acquire = now + opt_.acquire_interval;
            }
            now = Clock::now();
            if (now >= next_renew) {
                LeaseAnswer a = renew_leases(conn, key_, opt_.lease_duration, known);
                // Valid from when the renewal was sent, not when it answered.
                if (a.owned) publish(std::move(*a.owned), now + opt_.lease_duration);
                else extend(now + opt_.lease_duration);
                known = a.generation;
                next_renew = now + opt_.renew_interval;
            }
        });
        loop.succeeded();
        std::unique_lock lock(mu_);
        const auto due = std::min(next_acquire, next_renew);
        cv_.wait_until(lock, due, [&] { return stopping_ || refresh_ || !queued_.empty(); });
        // A busy worker hands checkpoints over every round: they are stored
        // at most every kCheckpointPacing, the last of each range.
        if (!queued_.empty())
            cv_.wait_until(lock, std::min(due, last_checkpoint_write_ + kCheckpointPacing),
                           [&] { return stopping_ || refresh_; });
        return true;
    };
    auto failed = [&](const Error& e, std::exception_ptr p) {
        const bool name_taken = e.code() == make_error_code(errc::instance_name_in_use);
        const auto situation = processor_situation(e);
        const bool halts =
            name_taken || (situation && *situation != Situation::connection_lost && [&] {
                // Dropped or disabled, or the leases are another role's: the policy decides, as in the worker.
                const RecoveryDecision d = events_.decide(Incident{*situation, std::nullopt, e.code(), e.what(), 0});
                if (d.halts()) events_.report_decided(std::nullopt, e, p, d);
                return d.halts();
            }());
        if (halts) {
            // Our name taken by another live instance while we were cut
            // off: its leases are its own now, so halt without touching them.
            if (name_taken) {
                events_.report(std::nullopt, e, p);
                events_.halt(State::stopped);
            }
            {
                std::lock_guard lock(mu_);
                stopping_ = true;
                if (name_taken) name_lost_ = true;
            }
            // Halted: this instance holds no lease any more (they are
            // released, where they still can be, when the processor stops).
            publish({}, std::nullopt);
            if (hooks_.halt) hooks_.halt();
            return AfterFailure::stop;
        }
        if (is_connection_error(e)) events_.telemetry().connection_lost(ConnectionRole::leases, e.what());
        else events_.report(std::nullopt, e, p);
        registered_on_ = 0;  // registered again at the next round, whatever failed
        return AfterFailure::back_off;
    };
    loop.run(stopping, round, failed);
    keep_until_released();
    for (int attempt = 0; attempt < 3; ++attempt) {
        {
            std::lock_guard lock(mu_);
            if (name_lost_) return;
        }
        try {
            session_->use([&](pqxx::connection& conn, std::uint64_t generation) {
                ensure_registered(conn, generation);
                write_checkpoints(conn);  // the worker's last ones, fenced by the leases still held
                release_leases(conn, key_);
                unregister_instance(conn, key_, token_);
            });
            return;
        } catch (...) {
            // The leases expire on their own if the server stays away, and the
            // name is free once this connection is gone.
            if (to_error(std::current_exception()).code() == make_error_code(errc::instance_name_in_use)) return;
            registered_on_ = 0;
        }
    }
}

// Renews, without acquiring, until the worker is done.
void LeaseKeeper::keep_until_released() {
    std::unique_lock lock(mu_);
    while (!released_ && !name_lost_) {
        lock.unlock();
        try {
            session_->use([&](pqxx::connection& conn, std::uint64_t generation) {
                ensure_registered(conn, generation);
                write_checkpoints(conn);
                (void)renew_leases(conn, key_, opt_.lease_duration, std::nullopt);
            });
        } catch (...) {
            const bool name_taken = to_error(std::current_exception()).code() ==
                                    make_error_code(errc::instance_name_in_use);
            registered_on_ = 0;
            if (name_taken) {
                lock.lock();
                name_lost_ = true;
                break;
            }
        }
        lock.lock();
        cv_.wait_for(lock, opt_.renew_interval, [&] { return released_ || !queued_.empty(); });
    }
}

void LeaseKeeper::publish(std::map<int, std::int64_t> got, std::optional<Clock::time_point> valid_until) {
    bool changed;
    std::vector<int> acquired, released;
    {
        std::lock_guard lock(mu_);
        const auto now = Clock::now();
        // The first answer counts as a change too: the worker waits for it.
        // So does a renewal that makes the view valid again (the first one,
        // or one after the leases' expiry): the worker reads nothing while
        // the view is not valid, and no other wake-up may come before a poll.
        changed = got != view_.owned || !view_.acquired_once ||
                  (valid_until && !got.empty() && view_.valid_until <= now && now < *valid_until);
        // A range held again at another epoch changed hands in between.
        for (const auto& [range, epoch] : view_.owned) {
            auto g = got.find(range);
            if (g == got.end() || g->second != epoch) released.push_back(range);
        }
        for (const auto& [range, epoch] : got) {
            auto o = view_.owned.find(range);
            if (o == view_.owned.end() || o->second != epoch) acquired.push_back(range);
        }
        if (got != view_.owned) ++view_.version;
        view_.owned = std::move(got);
        if (valid_until) view_.valid_until = *valid_until;
        view_.acquired_once = true;
    }
    tell(acquired, released, true);
    if (changed && hooks_.changed) hooks_.changed();
}

// A renewal that found nothing changed: the same leases, valid for longer.
// One that makes the view valid again wakes the worker, as in publish().
void LeaseKeeper::extend(Clock::time_point valid_until) {
    bool revived;
    {
        std::lock_guard lock(mu_);
        const auto now = Clock::now();
        revived = !view_.owned.empty() && view_.valid_until <= now && now < valid_until;
        view_.valid_until = valid_until;
    }
    if (revived && hooks_.changed) hooks_.changed();
}

void LeaseKeeper::tell(const std::vector<int>& acquired, const std::vector<int>& released, bool lost) const {
    events_.telemetry().leases(acquired, released, lost);
    for (int range : released) {
        if (!opt_.on_lease_released) break;
        try {
            opt_.on_lease_released(range);
        } catch (...) {
        }
    }
    for (int range : acquired) {
        if (!opt_.on_lease_acquired) break;
        try {
            opt_.on_lease_acquired(range);
        } catch (...) {
        }
    }
}

}  // namespace changefeed::detail
