// The exit codes of the changefeed command-line tool (docs/cli.md lists them).
// Database errors map by SQLSTATE, so a script can tell a refusal from an
// outage without parsing messages.
#pragma once

#include <string>

namespace changefeed::cli {

enum ExitCode : int {
    exit_ok = 0,
    exit_error = 1,         // anything else: an unexpected server or client error
    exit_usage = 2,         // bad arguments, or a value the server refused (CF003, CF004, CF005, CF011, 22xxx)
    exit_connection = 3,    // could not connect, or the connection was lost (08xxx, 28xxx, 3D000, 57P0x)
    exit_not_found = 4,     // no such table, not enabled, no extension, a processor that never ran
    exit_denied = 5,        // privilege denied (42501)
    exit_history_lost = 6,  // retention dropped changes the position had not read (CF006)
    exit_timeout = 7,       // --timeout passed before the command finished (--count not reached, backfill not done)
    exit_busy = 8,          // another party holds what the command needs: live instances (reset), CF010, CF015
    exit_check_failed = 9,  // the command ran and found a problem: lag over the warning share, verify() not intact
};

// The exit code a database error of this SQLSTATE ends the tool with.
ExitCode exit_code_of_sqlstate(const std::string& sqlstate);

}  // namespace changefeed::cli
