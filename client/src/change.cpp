// Names of operations and states.
#include <changefeed/change.hpp>
#include <changefeed/processor.hpp>

namespace changefeed {

const char* to_string(Operation op) noexcept {
    switch (op) {
    case Operation::create: return "create";
    case Operation::replace: return "replace";
    case Operation::delete_: return "delete";
    case Operation::clear: return "clear";
    }
    return "unknown";
}

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

}  // namespace changefeed
