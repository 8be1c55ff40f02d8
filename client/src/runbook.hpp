// Internal: the text on_error gets when a range's history is lost.
#pragma once

#include <string>

namespace changefeed::detail {

// What was lost and how to rebuild, for `table`/`processor`/`range`;
// `server_message` is the CF006 error (its DETAIL names the dropped window).
std::string history_lost_runbook(const std::string& table, const std::string& processor, int range,
                                 bool latest_version, const std::string& server_message);

}  // namespace changefeed::detail
