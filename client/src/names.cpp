#include "names.hpp"

#include <changefeed/error.hpp>

namespace changefeed::detail {

NameProblem name_problem(std::string_view name) {
    if (name.find_first_not_of(' ') == std::string_view::npos) return NameProblem::empty;
    std::size_t chars = 0;  // UTF-8: count the bytes that start a character
    for (unsigned char ch : name)
        if ((ch & 0xC0) != 0x80) ++chars;
    return chars > max_name_chars ? NameProblem::too_long : NameProblem::none;
}

void check_processor_name(const std::string& name, const std::string& stored) {
    if (name_problem(name) == NameProblem::empty)
        throw Error(errc::processor_name_empty, "the processor name must not be empty");
    if (name_problem(stored) == NameProblem::too_long)
        throw Error(errc::processor_name_too_long,
                    "the processor name must be at most 200 characters" +
                        (stored == name ? std::string() : " with its tenant prefix (\"" + stored + "\")"));
}

void check_instance_name(const std::string& instance) {
    if (name_problem(instance) != NameProblem::none)
        throw Error(errc::instance_name_invalid, "the instance name must not be blank or longer than 200 characters");
}

}  // namespace changefeed::detail
