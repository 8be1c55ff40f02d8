// Maps SQLSTATEs (class CF is the extension's) and libpqxx exceptions to errc.
#include "core/db.hpp"

#include "core/connection_string.hpp"
#include "core/statements.hpp"

namespace changefeed::detail {
namespace {

errc code_of_sqlstate(const std::string& state) {
    if (state == "CF002") return errc::collection_not_enabled;
    if (state == "42P01") return errc::collection_not_found;
    // CF003 an option value, 22023 an argument of a read or of diff() the server refuses.
    if (state == "CF003" || state == "22023") return errc::invalid_option;
    if (state == "CF004") return errc::malformed_position;
    if (state == "CF005") return errc::foreign_position;
    // History lost: retention dropped it (CF006), or capture was off (CF019).
    if (state == "CF006" || state == "CF019") return errc::history_lost;
    if (state == "CF009") return errc::read_in_writing_transaction;
    if (state == "CF010") return errc::lease_lost;
    if (state == "CF015") return errc::instance_name_in_use;
    if (state == "CF016") return errc::position_not_replayed;
    if (state == "CF017") return errc::other_history;
    // CF021: all versions of a collection that logs keys alone (images => 'keys').
    if (state == "CF021") return errc::images_not_logged;
    // CF012: lag of a processor that never ran -- a name the server does not know.
    if (state == "CF012") return errc::processor_not_found;
    if (state == "CF023") return errc::wait_timed_out;
    if (state == "CF025") return errc::cannot_rebuild;
    if (state == "CF026") return errc::position_ahead;
    // CF011 is a processor or an instance name the server refused; which one
    // the caller decides from the names it sent (classify_names).
    if (state == "CF011") return errc::invalid_option;
    if (state == "42501") return errc::permission_denied;
    // A write on a standby (or a read-only session): the processor's leases
    // and checkpoints need the primary.
    if (state == "25006") return errc::read_only_server;
    // Class 08 (connection exception) and the shutdown/termination codes of
    // class 57 mean the server went away under us.
    if (state.rfind("08", 0) == 0 || state == "57P01" || state == "57P02" || state == "57P03")
        return errc::connection_failed;
    return errc::database_error;
}

std::optional<ServerCondition> condition_of_sqlstate(const std::string& state) {
    if (state == "CF019") return ServerCondition::capture_was_off;
    if (state == "40001") return ServerCondition::replay_conflict;
    if (state == "CF020") return ServerCondition::ranges_changed;
    if (state == "57014") return ServerCondition::query_cancelled;
    if (state == "CF022" || state == "25000" || state == "42883") return ServerCondition::long_poll_unavailable;
    return std::nullopt;
}

// libpq's multi-line report ("ERROR:  message", "DETAIL:  ...", "HINT:  ...",
// "CONTEXT:  ...", continuation lines) as one line: the message, its detail,
// the SQLSTATE and the hint.  CONTEXT (which PL/pgSQL function, which line)
// stays in Error::server_text().
std::string one_line(const std::string& text, const std::string& state) {
    std::string message, detail, hint, *field = &message;
    std::size_t at = 0;
    while (at < text.size()) {
        auto end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(at, end - at);
        at = end + 1;
        const auto starts = [&](const char* prefix) {
            const std::size_t n = std::char_traits<char>::length(prefix);
            if (line.compare(0, n, prefix) != 0) return false;
            line.erase(0, n);
            while (!line.empty() && line.front() == ' ') line.erase(0, 1);
            return true;
        };
        if (starts("ERROR:") || starts("FATAL:")) field = &message;
        else if (starts("DETAIL:")) field = &detail;
        else if (starts("HINT:")) field = &hint;
        else if (starts("CONTEXT:") || starts("LINE ") || starts("QUERY:") || starts("STATEMENT:")) field = nullptr;
        if (!field || line.find_first_not_of(' ') == std::string::npos) continue;
        if (!field->empty()) *field += ' ';
        *field += line.substr(line.find_first_not_of(' '));
    }
    if (message.empty()) return text;
    const auto sentence = [](std::string s) {
        while (!s.empty() && (s.back() == '.' || s.back() == ';' || s.back() == ' ')) s.pop_back();
        return s;
    };
    std::string out = sentence(message);
    if (!detail.empty()) out += ". " + sentence(detail);
    if (!state.empty()) out += " (SQLSTATE " + state + ")";
    if (!hint.empty()) out += ". Hint: " + sentence(hint);
    return out;
}

// A statement the library prepared missing from the session, or one it
// prepares already there: the sessions change under it, as behind a pooler in
// transaction mode.  The report says what to do.
std::string with_pooler_hint(std::string line, const std::string& state, const std::string& text) {
    const bool ours = text.find("\"changefeed_") != std::string::npos;
    if (ours && (state == "26000" || state == "42P05"))
        line += ". Hint: behind a pooler in transaction mode (PgBouncer pool_mode=transaction), add "
                "changefeed_pooler=transaction to the connection string";
    return line;
}

// Any other text of libpq's on one line (a failed connection's report has a
// line and a tab-indented second one).
std::string flat(const std::string& text) {
    std::string out;
    for (const char c : text) {
        if (c == '\n' || c == '\t' || c == '\r') {
            if (!out.empty() && out.back() != ' ') out += ' ';
        } else {
            out += c;
        }
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out;
}

// libpqxx 6 drops the SQLSTATE of some errors it throws as a typed exception
// (insufficient_privilege among them): recover it from the type.
std::string sqlstate_of(const pqxx::sql_error& err) {
    if (!err.sqlstate().empty()) return std::string(err.sqlstate());
    if (dynamic_cast<const pqxx::insufficient_privilege*>(&err)) return "42501";
    if (dynamic_cast<const pqxx::undefined_table*>(&err)) return "42P01";
    return {};
}

}  // namespace

std::unique_ptr<pqxx::connection> connect(const std::string& conninfo) {
    const ConnectionTarget target = connection_target(conninfo);
    std::unique_ptr<pqxx::connection> c;
    try {
        c = std::make_unique<pqxx::connection>(target.libpq);
    } catch (const std::exception& e) {
        throw Error(errc::connection_failed, flat(e.what()), {}, e.what());
    }
    note_connection(*c, target.transaction_pooler);
    return c;
}

void require_primary(pqxx::connection& c) {
    const bool standby = translated([&] {
        pqxx::nontransaction tx(c);
        return tx.exec("SELECT pg_catalog.pg_is_in_recovery()")[0][0].as<bool>();
    });
    if (standby)
        throw Error(errc::read_only_server,
                    "the server is a standby (pg_is_in_recovery()): a processor stores its leases and checkpoints "
                    "there, which needs the primary. Connect the processor to the primary, e.g. with "
                    "\"host=A,B target_session_attrs=read-write\"; to read the feed from a standby, give its "
                    "connection string as the read_connection option",
                    "25006");
}

bool has_condition(const Error& e, ServerCondition c) { return condition_of_sqlstate(e.sqlstate()) == c; }

Error to_error(std::exception_ptr e) {
    try {
        std::rethrow_exception(e);
    } catch (const Error& err) {
        return err;
    } catch (const pqxx::broken_connection& err) {
        return Error(errc::connection_failed, flat(err.what()), {}, err.what());
    } catch (const pqxx::in_doubt_error& err) {
        return Error(errc::connection_failed, flat(err.what()), {}, err.what());
    } catch (const pqxx::sql_error& err) {
        const std::string state = sqlstate_of(err);
        return Error(code_of_sqlstate(state), with_pooler_hint(one_line(err.what(), state), state, err.what()), state,
                     err.what());
    } catch (const std::exception& err) {
        // The one place a retry decision reads message text: libpqxx 6 throws
        // some lost connections (a result that never came because the socket
        // closed, a LISTEN connection gone) as a plain pqxx::failure, with
        // neither a SQLSTATE nor a type of its own, and the caller here has no
        // connection to ask.  Everything above is classified by type or SQLSTATE.
        const std::string what = err.what();
        if (what.find("connection") != std::string::npos &&
            (what.find("lost") != std::string::npos || what.find("closed") != std::string::npos ||
             what.find("terminat") != std::string::npos || what.find("not open") != std::string::npos))
            return Error(errc::connection_failed, flat(what), {}, what);
        return Error(errc::database_error, flat(what), {}, what);
    } catch (...) {
        return Error(errc::database_error, "unknown error");
    }
}

Error classify_names(const Error& e, std::string_view processor, std::optional<std::string_view> instance) {
    if (e.sqlstate() != "CF011") return e;
    // The server checks the processor name first, then the instance name.
    switch (name_problem(processor)) {
    case NameProblem::empty: return Error(errc::processor_name_empty, e.what(), e.sqlstate(), e.server_text());
    case NameProblem::too_long: return Error(errc::processor_name_too_long, e.what(), e.sqlstate(), e.server_text());
    case NameProblem::none: break;
    }
    if (instance) return Error(errc::instance_name_invalid, e.what(), e.sqlstate(), e.server_text());
    return e;
}

}  // namespace changefeed::detail
