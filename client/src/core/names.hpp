// Internal: the rules for processor and instance names, shared by the
// PostgreSQL processor, the in-memory one and the error translation.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <tuple>

namespace changefeed::detail {

// The server's rule (changefeed.check_name): not blank (spaces only), at most
// 200 characters (not bytes).
constexpr std::size_t max_name_chars = 200;
enum class NameProblem { none, empty, too_long };
NameProblem name_problem(std::string_view name);

// Throws Error: processor_name_empty for a blank name, processor_name_too_long
// when the name as stored on the server (`stored`, with its tenant prefix) is too long.
void check_processor_name(const std::string& name, const std::string& stored);
// Throws Error(instance_name_invalid) for a blank or too long instance name.
void check_instance_name(const std::string& instance);

// The default instance names the processors of this process hold: processors
// of one process share a lease session, where the server cannot tell them
// apart, so a slot is claimed here before it is registered there.
class LocalInstanceNames {
public:
    static LocalInstanceNames& process();
    // Whether `instance` was free for the processor (and is now claimed).
    bool claim(const std::string& table, const std::string& processor, const std::string& instance);
    void release(const std::string& table, const std::string& processor, const std::string& instance);

private:
    std::mutex mu_;
    std::set<std::tuple<std::string, std::string, std::string>> names_;
};

}  // namespace changefeed::detail
