// Names of operations.
#include <changefeed/change.hpp>

namespace changefeed {

const char* to_string(Operation op) noexcept {
    switch (op) {
    case Operation::create: return "create";
    case Operation::replace: return "replace";
    case Operation::delete_: return "delete";
    case Operation::clear: return "clear";
    case Operation::schema: return "schema";
    }
    return "unknown";
}

std::optional<Operation> operation_named(const std::string& name) noexcept {
    for (auto op : {Operation::create, Operation::replace, Operation::delete_, Operation::clear, Operation::schema})
        if (name == to_string(op)) return op;
    return std::nullopt;
}

}  // namespace changefeed
