// A small libpq connection for the tool: psql's way of connecting (a database
// name or a whole connection string in -d, -h/-p/-U on top, PG* variables for
// the rest) and errors that keep their SQLSTATE, DETAIL and HINT.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace changefeed::cli {

// The connection options, as psql takes them.  Unset ones come from the PG*
// environment variables (libpq reads them).
struct ConnectOptions {
    std::string dbname;  // a database name, or a connection string / URI
    std::string host;
    std::string port;
    std::string user;
};

// A failed statement or connection.  `sqlstate` is empty when the server sent none.
class DbError : public std::runtime_error {
public:
    DbError(std::string message, std::string sqlstate, std::string detail = {}, std::string hint = {})
        : std::runtime_error(std::move(message)), sqlstate(std::move(sqlstate)), detail(std::move(detail)),
          hint(std::move(hint)) {}
    std::string sqlstate;
    std::string detail;
    std::string hint;
};

// An error of the tool itself, with the exit code it ends with.
class CliError : public std::runtime_error {
public:
    CliError(int code, const std::string& message) : std::runtime_error(message), code(code) {}
    int code;
};

class Result {
public:
    explicit Result(PGresult* r) : r_(r, PQclear) {}
    int rows() const { return PQntuples(r_.get()); }
    int columns() const { return PQnfields(r_.get()); }
    bool is_null(int row, int col) const { return PQgetisnull(r_.get(), row, col); }
    // The value as text ("" for null).
    std::string get(int row, int col) const { return PQgetvalue(r_.get(), row, col); }
    std::optional<std::string> opt(int row, int col) const {
        if (is_null(row, col)) return std::nullopt;
        return get(row, col);
    }
    std::string name(int col) const { return PQfname(r_.get(), col); }
    int column(const std::string& name) const;

private:
    std::shared_ptr<PGresult> r_;
};

class Connection {
public:
    explicit Connection(const ConnectOptions& options);
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    // Runs `sql` with text parameters (nullopt = NULL); throws DbError.
    Result exec(const std::string& sql, const std::vector<std::optional<std::string>>& params = {});
    // Waits until a notification arrives or `timeout` passes; whether one
    // arrived.  Notifications are consumed (they only say "read now").
    bool wait_for_notification(std::chrono::milliseconds timeout);
    std::string quote_identifier(const std::string& name);
    // Whether -d said changefeed_pooler=transaction: no LISTEN then (it would
    // stay on a server session the pooler hands to other clients).
    bool transaction_pooler() const noexcept { return transaction_pooler_; }

private:
    PGconn* conn_ = nullptr;
    bool transaction_pooler_ = false;
};

}  // namespace changefeed::cli
