// Error codes of the changefeed client.  Every exception the library throws is
// a changefeed::Error whose code() is one of these (database errors that have
// no code of their own are errc::database_error, with the SQLSTATE kept).
#pragma once

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>

namespace changefeed {

enum class errc {
    processor_name_empty = 1,  // the processor name is empty
    instance_name_invalid,     // the instance name is empty or too long
    already_started,           // start() on a running processor
    collection_not_found,      // the table does not exist
    collection_not_enabled,    // the table exists but changefeed.enable() was not run
    // No longer raised: start_from_beginning does not exist on the
    // all-versions feed's options (a compile error).  Kept so that the values
    // after it do not move.
    start_from_beginning_not_supported,
    invalid_option,               // an option value the server or the client refuses
    malformed_position,           // a position that is not one (CF004)
    foreign_position,             // a position of another cluster or database (CF005)
    history_lost,                 // the checkpoint predates what retention kept
    lease_lost,                   // the lease was taken over; the checkpoint was refused (CF010)
    read_in_writing_transaction,  // a read inside a transaction that captured changes (CF009)
    handler_failed,               // the handler threw; the batch is read again
    connection_failed,            // the server is unreachable or the connection dropped
    database_error,               // any other database error
    permission_denied,            // the role may not do this (SQLSTATE 42501): no SELECT on the
                                  // table, a processor owned by another role, a tenant it is not bound to
    processor_name_too_long,      // the processor name (with its tenant prefix) exceeds 200 characters
    instance_name_in_use,         // another live instance of the processor runs under this name (CF015)
    duplicates_rising,            // a projector skips more duplicates than duplicate_alert_share
    halted,                       // the recovery policy halted the processor or a range (see the runbook)
    publish_failed,               // a bridge's publisher could not confirm a batch (broker down, timeout)
    read_only_server,             // the server is a standby (in recovery) or read-only (SQLSTATE 25006):
                                  // leases and checkpoints need the primary
    position_not_replayed,        // a hot standby has not replayed the position yet (CF016): retry later
    other_history,                // a position of a history this server did not follow (CF017): a
                                  // point-in-time restore, a standby promoted from an earlier point
    images_not_logged,            // the all-versions feed of a collection that logs keys alone
                                  // (images => 'keys', CF021): read it with a latest-version processor
    processor_not_found,          // a processor name that never ran on the table (CF012): lag() of it
    wait_timed_out,               // wait_for() timed out: some range has not handled the changes yet (CF023)
    cannot_rebuild,               // as_of()/diff(): the log cannot undo what followed the position (CF025):
                                  // a TRUNCATE (clear) after it, or a change logged without the image before
    position_ahead,               // as_of()/diff(): a position newer than the reading snapshot (CF026)
};

// The enumerator's name ("handler_failed"), as logs and metrics label codes.
const char* to_string(errc code) noexcept;

const std::error_category& changefeed_category() noexcept;
std::error_code make_error_code(errc e) noexcept;

// The exception type of the library.
class Error : public std::system_error {
public:
    Error(errc code, const std::string& message, std::string sqlstate = {}, std::string server_text = {})
        : std::system_error(make_error_code(code), message), sqlstate_(std::move(sqlstate)),
          server_text_(std::move(server_text)) {}

    // The SQLSTATE of the database error behind this one, empty if none.
    const std::string& sqlstate() const noexcept { return sqlstate_; }
    // The server's whole report, as libpq gives it (several lines: ERROR,
    // DETAIL, HINT, CONTEXT); empty for an error that did not come from the
    // server.  what() is one line: the server's message, its detail, the
    // SQLSTATE and its hint, then what the errc says.
    const std::string& server_text() const noexcept { return server_text_; }

private:
    std::string sqlstate_;
    std::string server_text_;
};

// A failure reported to on_error (of a processor, a subscription, a bridge).
// A processor keeps running after it, except for history_lost: the range
// concerned halts (its lease is kept, no further changes of it are delivered)
// and the processor's state becomes history_lost; the message is the runbook (docs/runbooks/history-lost.md).
// Other ranges go on.  With the `resync` option the range is re-read from the
// table instead, and the processor stays running.
struct ErrorInfo {
    std::optional<int> range_id;  // the range concerned, if any
    std::error_code code;         // an errc value
    std::string message;
    std::exception_ptr exception;  // the exception thrown (handler's or the library's)
    // Set when the recovery policy halted something over this failure:
    // runbook_path() of the decision's runbook.
    std::string runbook;
};

}  // namespace changefeed

template <>
struct std::is_error_code_enum<changefeed::errc> : std::true_type {};
