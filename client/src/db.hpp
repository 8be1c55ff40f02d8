// Internal: connections and the translation of libpqxx errors into ours.
#pragma once

#include <changefeed/error.hpp>

#include <exception>
#include <memory>
#include <pqxx/pqxx>
#include <string>

namespace changefeed::detail {

// Opens a connection; throws Error(connection_failed).
std::unique_ptr<pqxx::connection> connect(const std::string& conninfo);

// The changefeed::Error for any exception (an Error is returned as is).
Error to_error(std::exception_ptr e);

// Whether an error means "the connection is gone": reconnect and resume.
inline bool is_connection_error(const Error& e) {
    return e.code() == make_error_code(errc::connection_failed);
}

// Runs `f`, rethrowing whatever it throws as a changefeed::Error.
template <class F>
auto translated(F&& f) -> decltype(f()) {
    try {
        return f();
    } catch (...) {
        throw to_error(std::current_exception());
    }
}

}  // namespace changefeed::detail
