// Internal: connections and the translation of libpqxx errors into ours.
#pragma once

#include <changefeed/error.hpp>

#include "core/names.hpp"
#include "core/pqxx_compat.hpp"

#include <exception>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <string_view>

namespace changefeed::detail {

// Opens a connection; throws Error(connection_failed).
std::unique_ptr<pqxx::connection> connect(const std::string& conninfo);

// The changefeed::Error for any exception (an Error is returned as is).
Error to_error(std::exception_ptr e);

// Whether an error means "the connection is gone": reconnect and resume.
inline bool is_connection_error(const Error& e) { return e.code() == make_error_code(errc::connection_failed); }

// What a few SQLSTATEs tell the range worker beyond their errc, which they
// keep (on_error sees the same code): the one place besides the errc table
// that reads a SQLSTATE.
enum class ServerCondition {
    capture_was_off,        // CF019: history lost because capture was off (errc::history_lost)
    replay_conflict,        // 40001: a standby's replay cancelled the read; it can succeed later
    ranges_changed,         // CF020: the collection's number of ranges changed
    query_cancelled,        // 57014: the statement was cancelled (a long poll interrupted)
    long_poll_unavailable,  // CF022, 25000, 42883: no read_ranges(..., wait) on this server or session
};
bool has_condition(const Error& e, ServerCondition c);

// Throws Error(read_only_server) when `c` reached a standby: a processor's
// leases and checkpoints are writes, which only the primary takes.
void require_primary(pqxx::connection& c);

// A CF011 (a name the server refused) as the errc of the name at fault,
// decided from the names the call sent; any other error is returned as is.
Error classify_names(const Error& e, std::string_view processor, std::optional<std::string_view> instance);

// Runs `f`, rethrowing whatever it throws as a changefeed::Error.
template <class F>
auto translated(F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (...) {
        throw to_error(std::current_exception());
    }
}

// translated(), with CF011 classified by the names the call sent.
template <class F>
auto translated_names(std::string_view processor, std::optional<std::string_view> instance, F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (...) {
        throw classify_names(to_error(std::current_exception()), processor, instance);
    }
}

}  // namespace changefeed::detail
