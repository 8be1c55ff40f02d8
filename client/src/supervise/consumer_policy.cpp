#include "supervise/consumer_policy.hpp"

#include "core/db.hpp"

#include <algorithm>
#include <random>

namespace changefeed::detail {

void tell_error(const std::function<void(const ErrorInfo&)>& on_error, std::optional<int> range, const Error& e,
                std::exception_ptr p) {
    tell_error(on_error, ErrorInfo{range, e.code(), e.what(), p ? p : std::make_exception_ptr(e), {}});
}

void tell_error(const std::function<void(const ErrorInfo&)>& on_error, const ErrorInfo& info) {
    if (!on_error) {
        // Nobody listens: a failure must still be seen by whoever runs the service.
        Telemetry().error(info);
        return;
    }
    try {
        on_error(info);
    } catch (...) {
    }
}

Error handler_failure(std::exception_ptr p, const std::string& what) {
    try {
        std::rethrow_exception(p);
    } catch (const std::exception& e) {
        return Error(errc::handler_failed, what + ": " + e.what());
    } catch (...) {
    }
    return Error(errc::handler_failed, what);
}

void ConsumerEvents::set_state(State s) {
    // A processor halted (by either thread) stays so until the next start():
    // the other thread, still finishing a pass, must not report it running.
    const bool live = s == State::running || s == State::resuming;
    if (s == State::starting) halted_ = false;
    else if (halted_ && live) return;
    const State before = state_.exchange(s);
    if (live && halted_) {  // a halt came between the test and the exchange: it wins
        state_.store(halted_state_);
        return;
    }
    if (before == s || !on_state_change_) return;
    try {
        on_state_change_(s);
    } catch (...) {
    }
}

// The log and the metrics first: a slow or throwing on_error must not hide it.
void ConsumerEvents::tell(const ErrorInfo& info) const {
    telemetry_.error(info);
    if (!on_error_) return;
    try {
        on_error_(info);
    } catch (...) {
    }
}

void ConsumerEvents::report(std::optional<int> range, const Error& e, std::exception_ptr p) const {
    tell(ErrorInfo{range, e.code(), e.what(), p ? p : std::make_exception_ptr(e), {}});
}

void ConsumerEvents::report_handler_failure(std::optional<int> range, std::exception_ptr p,
                                            const std::string& what) const {
    const Error e = handler_failure(p, what);
    tell(ErrorInfo{range, e.code(), e.what(), p, {}});
}

std::optional<Situation> processor_situation(const Error& e) {
    if (e.code() == make_error_code(errc::collection_not_found) ||
        e.code() == make_error_code(errc::collection_not_enabled))
        return Situation::collection_gone;
    if (e.code() == make_error_code(errc::permission_denied)) return Situation::processor_owned_by_another_role;
    if (is_connection_error(e)) return Situation::connection_lost;
    return std::nullopt;
}

RecoveryDecision ConsumerEvents::decide(const Incident& incident) const {
    if (recovery_) {
        try {
            return recovery_(incident);
        } catch (...) {
            // A policy that fails decides nothing: the defaults stand.
        }
    }
    return default_recovery(incident);
}

void ConsumerEvents::report_decided(std::optional<int> range, const Error& e, std::exception_ptr p,
                                    const RecoveryDecision& d) {
    if (!d.halts()) {
        report(range, e, p);
        return;
    }
    const std::string runbook = runbook_path(d.runbook());
    tell(ErrorInfo{range, e.code(), e.what(), p ? p : std::make_exception_ptr(e), runbook});
    Error halted(errc::halted, std::string(range ? "range " + std::to_string(*range) : std::string("the processor")) +
                                   " halted by the recovery policy after: " + e.what() + " -- see " + runbook);
    tell(ErrorInfo{range, halted.code(), halted.what(), std::make_exception_ptr(halted), runbook});
    if (range) set_state(d.state());
    else halt(d.state());
}

void ConsumerEvents::halt(State s) {
    halted_state_ = s;
    halted_ = true;
    set_state(s);
}

std::chrono::milliseconds Backoff::next() {
    thread_local std::minstd_rand random(std::random_device{}());
    const auto upper = next_;
    next_ = std::min(next_ * 2, max_);
    const auto half = upper.count() / 2;
    std::uniform_int_distribution<std::chrono::milliseconds::rep> draw(upper.count() - half, upper.count());
    return std::chrono::milliseconds(draw(random));
}

}  // namespace changefeed::detail
