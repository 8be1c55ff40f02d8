// What a processor does when something goes wrong: per situation a decision,
// resume or halt.  A halt names a runbook (docs/runbooks/<name>.md), so that
// the operator who finds a halted processor knows what to do next.
//
//   options.recovery = [](const changefeed::Incident& i) {
//       if (i.situation == changefeed::Situation::handler_failing && i.consecutive_failures >= 5)
//           return changefeed::RecoveryDecision::halt(changefeed::State::stopped, "handler-failing");
//       return changefeed::default_recovery(i);
//   };
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <system_error>

namespace changefeed {

// The states of a processor, as an operator sees them.
enum class State {
    stopped,       // not started, stopped, or halted by the recovery policy
    starting,      // start() called, first leases not yet taken
    running,       // reading
    resuming,      // a connection dropped; reconnecting, then resuming from the checkpoints
    history_lost,  // halted: the checkpoint predates the retained log (see the runbook in on_error)
};

const char* to_string(State s) noexcept;

// The situations a recovery policy decides on.
enum class Situation {
    connection_lost,                  // the connection dropped or the server restarted: checkpoints still valid
    history_lost,                     // a range's checkpoint predates the retained log (or is not usable here)
    collection_gone,                  // the table was dropped or disabled (MongoDB's invalidate)
    processor_owned_by_another_role,  // the processor's leases belong to another role (42501)
    handler_failing,                  // the handler threw on a batch (consecutive_failures counts them)
};

const char* to_string(Situation s) noexcept;

struct Incident {
    Situation situation = Situation::connection_lost;
    std::optional<int> range_id;  // the range concerned, for history_lost and handler_failing
    std::error_code code;         // an errc value
    std::string message;
    int consecutive_failures = 0;  // handler_failing: failures of this range in a row, this one included
};

class RecoveryDecision {
public:
    // Go on: reconnect and resume from the checkpoints, or retry the batch.
    static RecoveryDecision resume() { return RecoveryDecision(); }
    // Stop and wait for an operator.  `state` is stopped or history_lost;
    // `runbook` names docs/runbooks/<runbook>.md and must not be empty.
    // Throws std::invalid_argument otherwise.
    static RecoveryDecision halt(State state, std::string runbook);

    bool halts() const noexcept { return halts_; }
    State state() const noexcept { return state_; }
    const std::string& runbook() const noexcept { return runbook_; }

private:
    RecoveryDecision() = default;
    bool halts_ = false;
    State state_ = State::running;
    std::string runbook_;
};

// The defaults (seed of every policy):
//   connection_lost                  resume
//   history_lost                     halt(history_lost, "history-lost")
//   collection_gone                  halt(stopped, "collection-gone")
//   processor_owned_by_another_role  halt(stopped, "processor-owned-by-another-role")
//   handler_failing                  resume (the batch is retried after retry_delay)
// A range-scoped halt (history_lost, handler_failing) stops that range and
// keeps its lease, so that no other instance takes it over; the others go on.
// Any other halt stops the processor and releases its leases.
// history_lost with the latest-version `resync` option is not a halt: the
// range is re-read from the table.
RecoveryDecision default_recovery(const Incident& incident);

// "docs/runbooks/<runbook>.md": where a runbook named by a decision lives.
std::string runbook_path(const std::string& runbook);

using RecoveryPolicy = std::function<RecoveryDecision(const Incident&)>;

}  // namespace changefeed
