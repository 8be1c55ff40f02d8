// Internal: the text on_error gets when a range's history is lost.
#pragma once

#include <string>

namespace changefeed::detail {

// Why a range's checkpoint cannot be resumed from.
enum class LostBecause {
    retention,         // CF006: retention dropped changes after it
    other_database,    // CF005: taken in another database or cluster (a restore, a clone)
    invalid_position,  // CF004: not a valid position here (from before an upgrade, or damaged)
    capture_disabled,  // CF019: capture was off (disable, then enable) after it
    other_history,     // CF017: taken on a history this server did not follow (a point-in-time restore)
    keys_only,         // CF021: the collection logs keys alone (images => 'keys'): no versions to read
};

// What was lost and how to rebuild, for `table`/`processor`/`range`;
// `server_message` is the server's error (CF006's DETAIL names the dropped window).
std::string history_lost_runbook(const std::string& table, const std::string& processor, int range, bool latest_version,
                                 LostBecause why, const std::string& server_message);

}  // namespace changefeed::detail
