#include <changefeed/error.hpp>
#include <changefeed/recovery.hpp>

#include <stdexcept>

namespace changefeed {

const char* to_string(State s) noexcept {
    switch (s) {
    case State::stopped: return "stopped";
    case State::starting: return "starting";
    case State::running: return "running";
    case State::resuming: return "resuming";
    case State::history_lost: return "history_lost";
    }
    return "unknown";
}

const char* to_string(Situation s) noexcept {
    switch (s) {
    case Situation::connection_lost: return "connection_lost";
    case Situation::history_lost: return "history_lost";
    case Situation::collection_gone: return "collection_gone";
    case Situation::processor_owned_by_another_role: return "processor_owned_by_another_role";
    case Situation::handler_failing: return "handler_failing";
    }
    return "unknown";
}

RecoveryDecision RecoveryDecision::halt(State state, std::string runbook) {
    if (state != State::stopped && state != State::history_lost)
        throw std::invalid_argument("a halt leaves the processor stopped or history_lost, not " +
                                    std::string(to_string(state)));
    if (runbook.empty()) throw std::invalid_argument("a halt must name a runbook");
    RecoveryDecision d;
    d.halts_ = true;
    d.state_ = state;
    d.runbook_ = std::move(runbook);
    return d;
}

RecoveryDecision default_recovery(const Incident& incident) {
    switch (incident.situation) {
    case Situation::history_lost: return RecoveryDecision::halt(State::history_lost, "history-lost");
    case Situation::collection_gone: return RecoveryDecision::halt(State::stopped, "collection-gone");
    case Situation::processor_owned_by_another_role:
        return RecoveryDecision::halt(State::stopped, "processor-owned-by-another-role");
    case Situation::connection_lost:
    case Situation::handler_failing: break;
    }
    return RecoveryDecision::resume();
}

std::string runbook_path(const std::string& runbook) { return "docs/runbooks/" + runbook + ".md"; }

}  // namespace changefeed
