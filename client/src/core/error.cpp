// The changefeed error category.
#include <changefeed/error.hpp>

namespace changefeed {
namespace {

class Category final : public std::error_category {
public:
    const char* name() const noexcept override { return "changefeed"; }

    std::string message(int value) const override {
        switch (static_cast<errc>(value)) {
        case errc::processor_name_empty: return "the processor name is empty";
        case errc::instance_name_invalid: return "the instance name is empty or too long";
        case errc::already_started: return "the processor is already started";
        case errc::collection_not_found: return "the table does not exist";
        case errc::collection_not_enabled: return "the table is not enabled for changefeed";
        case errc::start_from_beginning_not_supported:
            return "start_from_beginning is not supported on the all-versions feed";
        case errc::invalid_option: return "invalid option value";
        case errc::malformed_position: return "malformed position";
        case errc::foreign_position: return "position of another cluster or database";
        case errc::history_lost:
            return "changes after the start point (a checkpoint, position or start time) are no longer in the log";
        case errc::lease_lost: return "the lease was taken over by another instance";
        case errc::read_in_writing_transaction: return "read inside a transaction that captured changes";
        case errc::handler_failed: return "the handler threw; the batch will be read again";
        case errc::connection_failed: return "the database connection failed";
        case errc::database_error: return "database error";
        case errc::permission_denied:
            return "permission denied: the role lacks a privilege this needs (SELECT on the table, ownership of"
                   " the processor, membership in changefeed_processor, or a tenant binding)";
        case errc::processor_name_too_long: return "the processor name is longer than 200 characters";
        case errc::instance_name_in_use: return "another live instance of the processor uses this instance name";
        case errc::duplicates_rising: return "the projector skips an unusual share of changes as duplicates";
        case errc::halted: return "halted by the recovery policy";
        case errc::publish_failed: return "the publisher could not confirm the batch";
        case errc::read_only_server: return "the server is read-only (a standby): connect the processor to the primary";
        case errc::position_not_replayed: return "the standby has not replayed the position yet";
        case errc::other_history: return "the position belongs to a history this server did not follow";
        case errc::images_not_logged:
            return "the collection logs keys alone (images => 'keys'): the all-versions feed is not available";
        case errc::processor_not_found: return "no processor of this name has run on the table";
        case errc::wait_timed_out: return "the processor has not handled every change before the position in time";
        case errc::cannot_rebuild: return "the log cannot undo the changes after the position";
        case errc::position_ahead: return "the position is newer than the reading snapshot";
        }
        return "unknown changefeed error";
    }
};

}  // namespace

const char* to_string(errc code) noexcept {
    switch (code) {
    case errc::processor_name_empty: return "processor_name_empty";
    case errc::instance_name_invalid: return "instance_name_invalid";
    case errc::already_started: return "already_started";
    case errc::collection_not_found: return "collection_not_found";
    case errc::collection_not_enabled: return "collection_not_enabled";
    case errc::start_from_beginning_not_supported: return "start_from_beginning_not_supported";
    case errc::invalid_option: return "invalid_option";
    case errc::malformed_position: return "malformed_position";
    case errc::foreign_position: return "foreign_position";
    case errc::history_lost: return "history_lost";
    case errc::lease_lost: return "lease_lost";
    case errc::read_in_writing_transaction: return "read_in_writing_transaction";
    case errc::handler_failed: return "handler_failed";
    case errc::connection_failed: return "connection_failed";
    case errc::database_error: return "database_error";
    case errc::permission_denied: return "permission_denied";
    case errc::processor_name_too_long: return "processor_name_too_long";
    case errc::instance_name_in_use: return "instance_name_in_use";
    case errc::duplicates_rising: return "duplicates_rising";
    case errc::halted: return "halted";
    case errc::publish_failed: return "publish_failed";
    case errc::read_only_server: return "read_only_server";
    case errc::position_not_replayed: return "position_not_replayed";
    case errc::other_history: return "other_history";
    case errc::images_not_logged: return "images_not_logged";
    case errc::processor_not_found: return "processor_not_found";
    case errc::wait_timed_out: return "wait_timed_out";
    case errc::cannot_rebuild: return "cannot_rebuild";
    case errc::position_ahead: return "position_ahead";
    }
    return "unknown";
}

const std::error_category& changefeed_category() noexcept {
    static const Category category;
    return category;
}

std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), changefeed_category()}; }

}  // namespace changefeed
