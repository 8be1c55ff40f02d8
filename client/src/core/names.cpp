#include "core/names.hpp"

#include <changefeed/error.hpp>
#include <changefeed/processor_names.hpp>

#include <unistd.h>

#include <cstdio>

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

namespace changefeed {

std::string stored_processor_name(const std::string& name, const std::string& tenant) {
    if (tenant.empty()) return name;
    std::string out;
    for (char ch : tenant) {
        if (ch == '%') out += "%25";
        else if (ch == '/') out += "%2F";
        else out += ch;
    }
    return out + "/" + name;
}

// The host alone is what a restarted process has in common with the one that
// died: start() adds the lowest slot no other live instance of the processor
// holds ("<host>-<n>"), so the restart takes its ranges back at once.
std::string default_instance_name() {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') std::snprintf(host, sizeof host, "localhost");
    // The server allows 200 characters; a long host name is cut, not the slot.
    std::string h(host);
    if (h.size() > 150) h.resize(150);
    return h;
}

namespace detail {

bool LocalInstanceNames::claim(const std::string& table, const std::string& processor, const std::string& instance) {
    std::lock_guard lock(mu_);
    return names_.emplace(table, processor, instance).second;
}

void LocalInstanceNames::release(const std::string& table, const std::string& processor, const std::string& instance) {
    std::lock_guard lock(mu_);
    names_.erase({table, processor, instance});
}

LocalInstanceNames& LocalInstanceNames::process() {
    static LocalInstanceNames names;
    return names;
}

}  // namespace detail
}  // namespace changefeed
