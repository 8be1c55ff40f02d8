// Internal: the policy the three consumers share -- the PostgreSQL processor,
// the in-memory one and subscriptions: telling on_state_change and on_error,
// turning a failed handler into an Error, and the reconnect backoff.
#pragma once

#include <changefeed/error.hpp>
#include <changefeed/log.hpp>
#include <changefeed/recovery.hpp>

#include "observe/telemetry.hpp"

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>

namespace changefeed::detail {

// Calls on_error, or without one logs the failure to stderr (log_to_stderr);
// an exception on_error throws is swallowed (it must not stop the thread that
// reports).  For consumers without a log sink of their own (subscriptions).
void tell_error(const std::function<void(const ErrorInfo&)>& on_error, std::optional<int> range, const Error& e,
                std::exception_ptr p);
void tell_error(const std::function<void(const ErrorInfo&)>& on_error, const ErrorInfo& info);

// The handler_failed Error for the exception a handler or callback threw;
// `what` names the culprit ("handler failed").
Error handler_failure(std::exception_ptr p, const std::string& what);

// The recovery policy's situation for a failure that concerns the whole
// processor (the table gone, the processor's leases another role's, the
// connection lost); none for other errors.
std::optional<Situation> processor_situation(const Error& e);

// A consumer's state and its callbacks: each change of state is told once.
// Every failure reported goes to the telemetry (counted, logged) and to on_error.
class ConsumerEvents {
public:
    ConsumerEvents(std::function<void(const ErrorInfo&)> on_error, std::function<void(State)> on_state_change,
                   RecoveryPolicy recovery = {}, std::shared_ptr<Metrics> metrics = nullptr, LogSink log = {})
        : on_error_(std::move(on_error)), on_state_change_(std::move(on_state_change)), recovery_(std::move(recovery)),
          telemetry_(std::move(metrics), std::move(log)) {}

    Telemetry& telemetry() { return telemetry_; }
    const Telemetry& telemetry() const { return telemetry_; }

    State state() const { return state_; }
    void set_state(State s);
    // The processor halted (by either thread) in state `s`: it stays there,
    // whatever the other thread still reports, until the next start().
    void halt(State s);
    // `p` defaults to the Error itself.
    void report(std::optional<int> range, const Error& e, std::exception_ptr p = nullptr) const;
    // Reports a handler's exception as handler_failed.
    void report_handler_failure(std::optional<int> range, std::exception_ptr p, const std::string& what) const;

    // The recovery policy's decision on `incident` (default_recovery without
    // one, or when the policy throws).
    RecoveryDecision decide(const Incident& incident) const;
    // Reports `e` for an incident the policy answered: with the runbook when
    // it halts, then errc::halted, and the decision's state.
    void report_decided(std::optional<int> range, const Error& e, std::exception_ptr p, const RecoveryDecision& d);

private:
    void tell(const ErrorInfo& info) const;

    std::function<void(const ErrorInfo&)> on_error_;
    std::function<void(State)> on_state_change_;
    RecoveryPolicy recovery_;
    Telemetry telemetry_;
    std::atomic<State> state_{State::stopped};
    std::atomic<bool> halted_{false};  // the processor (not a range) halted since start
    std::atomic<State> halted_state_{State::stopped};
};

// Reconnect delays: doubling from min up to max, each drawn at random from
// its upper half, so that many clients cut off together do not come back in
// step.  reset() after a success.
class Backoff {
public:
    Backoff(std::chrono::milliseconds min, std::chrono::milliseconds max) : min_(min), max_(max), next_(min) {}
    std::chrono::milliseconds next();
    void reset() { next_ = min_; }

private:
    std::chrono::milliseconds min_, max_, next_;
};

}  // namespace changefeed::detail
