#include "connection.hpp"

#include "exit_codes.hpp"

#include "core/connection_string.hpp"

#include <changefeed/error.hpp>

#include <poll.h>

namespace changefeed::cli {
namespace {

std::string field(const PGresult* r, int code) {
    const char* v = PQresultErrorField(r, code);
    return v ? v : "";
}

std::string trim(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
}

}  // namespace

int Result::column(const std::string& name) const {
    int c = PQfnumber(r_.get(), name.c_str());
    if (c < 0) throw std::logic_error("no column " + name + " in the result");
    return c;
}

Connection::Connection(const ConnectOptions& o) {
    // As psql: -d may be a whole connection string (expand_dbname), and the
    // options given on the command line win over it; libpq fills in the rest
    // from the PG* environment.
    std::vector<const char*> keys, values;
    auto add = [&](const char* k, const std::string& v) {
        if (v.empty()) return;
        keys.push_back(k);
        values.push_back(v.c_str());
    };
    // changefeed_pooler is the library's keyword, not libpq's: taken out here;
    // a value it does not know is a bad argument.
    const detail::ConnectionTarget target = [&] {
        try {
            return detail::connection_target(o.dbname);
        } catch (const Error& e) {
            throw CliError(exit_usage, e.what());
        }
    }();
    transaction_pooler_ = target.transaction_pooler;
    add("dbname", target.libpq);
    add("host", o.host);
    add("port", o.port);
    add("user", o.user);
    keys.push_back("fallback_application_name");
    values.push_back("changefeed");
    keys.push_back(nullptr);
    values.push_back(nullptr);
    conn_ = PQconnectdbParams(keys.data(), values.data(), 1);
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
        std::string message = conn_ ? trim(PQerrorMessage(conn_)) : "out of memory";
        if (conn_) PQfinish(conn_);
        conn_ = nullptr;
        throw CliError(exit_connection, "could not connect: " + message);
    }
}

Connection::~Connection() {
    if (conn_) PQfinish(conn_);
}

Result Connection::exec(const std::string& sql, const std::vector<std::optional<std::string>>& params) {
    std::vector<const char*> values;
    for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
    PGresult* r = PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                               nullptr, 0);
    Result result(r);
    const auto status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return result;
    if (PQstatus(conn_) != CONNECTION_OK)
        throw CliError(exit_connection, "connection lost: " + trim(PQerrorMessage(conn_)));
    std::string message = r ? field(r, PG_DIAG_MESSAGE_PRIMARY) : "";
    if (message.empty()) message = trim(PQerrorMessage(conn_));
    throw DbError(message, r ? field(r, PG_DIAG_SQLSTATE) : "", r ? field(r, PG_DIAG_MESSAGE_DETAIL) : "",
                  r ? field(r, PG_DIAG_MESSAGE_HINT) : "");
}

bool Connection::wait_for_notification(std::chrono::milliseconds timeout) {
    auto drain = [&] {
        bool any = false;
        while (PGnotify* n = PQnotifies(conn_)) {
            PQfreemem(n);
            any = true;
        }
        return any;
    };
    if (drain()) return true;
    pollfd fd{PQsocket(conn_), POLLIN, 0};
    if (poll(&fd, 1, static_cast<int>(timeout.count())) > 0) {
        if (!PQconsumeInput(conn_)) throw CliError(exit_connection, "connection lost: " + trim(PQerrorMessage(conn_)));
        return drain();
    }
    return false;
}

std::string Connection::quote_identifier(const std::string& name) {
    char* q = PQescapeIdentifier(conn_, name.c_str(), name.size());
    if (!q) throw DbError(trim(PQerrorMessage(conn_)), "");
    std::string out = q;
    PQfreemem(q);
    return out;
}

}  // namespace changefeed::cli
