// The history-lost runbook, short form; the full one is
// docs/runbooks/history-lost.md.  A halt must say what to do next (seed 003).
#include "runbook.hpp"

namespace changefeed::detail {

std::string history_lost_runbook(const std::string& table, const std::string& processor, int range,
                                 bool latest_version, const std::string& server_message) {
    std::string out;
    out += "HISTORY LOST: processor \"" + processor + "\" on " + table + ", range " + std::to_string(range) +
           " halted (state history_lost); it will not restart from now by itself.\n";
    out += "What was lost: retention dropped changes written after this range's checkpoint, before the"
           " processor read them; they cannot be read again. Server: " + server_message + "\n";
    out += "Runbook (docs/runbooks/history-lost.md):\n";
    out += "  1. See what is affected: SELECT * FROM changefeed.horizon; SELECT * FROM changefeed.lag('" + table +
           "', '" + processor + "');\n";
    if (latest_version) {
        out += "  2. Rebuild from the table, which holds every document's current version: restart the processor"
               " with the resync option (re-reads the range as a backfill, then continues), or delete its leases"
               " (DELETE FROM changefeed.lease WHERE processor = '" + processor +
               "' AND collection_id = (changefeed.collection_of('" + table +
               "')).id) and start it with start_from_beginning.\n";
    } else {
        out += "  2. The intermediate versions and deletes in the gap are gone for good: record the gap for the"
               " consumers of this feed, reconcile from the table if the data owner accepts it, then delete the"
               " processor's leases and start it again (it then starts from the current end of the feed).\n";
    }
    out += "  3. Prevent it: alert on changefeed.lag(...).retention_used, raise the retention with"
           " changefeed.alter('" + table + "', retention => ...).";
    return out;
}

}  // namespace changefeed::detail
