// changefeed: the command-line tool of the changefeed extension (docs/cli.md).
// Connects like psql (-d, -h, -p, -U, the PG* variables) and ends with an
// exit code that says what happened (exit_codes.hpp).
#include "commands.hpp"
#include "exit_codes.hpp"

#include <CLI/CLI.hpp>

#include <iostream>

#ifndef CHANGEFEED_CLI_VERSION
#define CHANGEFEED_CLI_VERSION "unknown"
#endif

using namespace changefeed::cli;

int main(int argc, char** argv) {
    CLI::App app{"changefeed: look at and operate the change feeds of a PostgreSQL database"};
    app.require_subcommand(1);
    app.fallthrough();  // connection options may also follow the subcommand
    app.set_version_flag("--version", std::string("changefeed ") + CHANGEFEED_CLI_VERSION);
    app.footer("Exit codes: 0 ok, 1 error, 2 usage, 3 connection, 4 not found or not enabled, 5 privilege denied,\n"
               "6 history lost, 7 timeout, 8 busy, 9 check failed.  See docs/cli.md.");

    // -h is the host, as in psql: help is --help only.
    app.set_help_flag("--help", "print this help and exit");
    ConnectOptions connect;
    app.add_option("-d,--dbname", connect.dbname, "database name or connection string (default: PGDATABASE)");
    app.add_option("-h,--host", connect.host, "server host or socket directory (default: PGHOST)");
    app.add_option("-p,--port", connect.port, "server port (default: PGPORT)");
    app.add_option("-U,--username", connect.user, "role to connect as (default: PGUSER)");

    Action action;
    Wiring w{app, connect, action};
    add_tail(w);
    add_status(w);
    add_processors(w);
    add_lag(w);
    add_checkpoint(w);
    add_backfill(w);
    add_maintain(w);

    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        return exit_usage;
    }
    try {
        return action ? action() : exit_usage;
    } catch (const CliError& e) {
        std::cerr << "changefeed: " << e.what() << '\n';
        return e.code;
    } catch (const DbError& e) {
        std::cerr << "changefeed: " << e.what();
        if (!e.sqlstate.empty()) std::cerr << " (SQLSTATE " << e.sqlstate << ")";
        std::cerr << '\n';
        if (!e.detail.empty()) std::cerr << "DETAIL: " << e.detail << '\n';
        if (!e.hint.empty()) std::cerr << "HINT: " << e.hint << '\n';
        return exit_code_of_sqlstate(e.sqlstate);
    } catch (const std::exception& e) {
        std::cerr << "changefeed: " << e.what() << '\n';
        return exit_error;
    }
}
