// Maps SQLSTATEs (class CF is the extension's) and libpqxx exceptions to errc.
#include "db.hpp"

namespace changefeed::detail {
namespace {

errc code_of_sqlstate(const std::string& state, const std::string& message) {
    if (state == "CF002") return errc::collection_not_enabled;
    if (state == "42P01") return errc::collection_not_found;
    if (state == "CF003") return errc::invalid_option;
    if (state == "CF004") return errc::malformed_position;
    if (state == "CF005") return errc::foreign_position;
    // CF006 is reserved for "history lost" by the retention work.
    if (state == "CF006") return errc::history_lost;
    if (state == "CF009") return errc::read_in_writing_transaction;
    if (state == "CF010") return errc::lease_lost;
    // CF012: lag of a processor that never ran -- a name the server does not know.
    if (state == "CF012") return errc::invalid_option;
    if (state == "CF011")
        return message.find("processor") != std::string::npos ? errc::processor_name_empty
                                                               : errc::instance_name_invalid;
    // Class 08 (connection exception) and the shutdown/termination codes of
    // class 57 mean the server went away under us.
    if (state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02" || state == "57P03")
        return errc::connection_failed;
    return errc::database_error;
}

}  // namespace

std::unique_ptr<pqxx::connection> connect(const std::string& conninfo) {
    try {
        return std::make_unique<pqxx::connection>(conninfo);
    } catch (const std::exception& e) {
        throw Error(errc::connection_failed, e.what());
    }
}

Error to_error(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const Error& err) {
        return err;
    } catch (const pqxx::broken_connection& err) {
        return Error(errc::connection_failed, err.what());
    } catch (const pqxx::in_doubt_error& err) {
        return Error(errc::connection_failed, err.what());
    } catch (const pqxx::sql_error& err) {
        const std::string state = err.sqlstate();
        return Error(code_of_sqlstate(state, err.what()), err.what(), state);
    } catch (const std::exception& err) {
        // libpqxx reports some lost connections as plain failures.
        const std::string what = err.what();
        if (what.find("connection") != std::string::npos &&
            (what.find("lost") != std::string::npos || what.find("closed") != std::string::npos ||
             what.find("terminat") != std::string::npos || what.find("not open") != std::string::npos))
            return Error(errc::connection_failed, what);
        return Error(errc::database_error, what);
    } catch (...) {
        return Error(errc::database_error, "unknown error");
    }
}

}  // namespace changefeed::detail
