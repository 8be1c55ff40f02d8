// Names of operations.
#include <changefeed/change.hpp>

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

}  // namespace changefeed
