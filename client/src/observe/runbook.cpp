// The history-lost runbook, short form; the full one is
// docs/runbooks/history-lost.md.  A halt must say what to do next: a consumer that
// stops without a way forward is left for someone to guess at.
#include "observe/runbook.hpp"

namespace changefeed::detail {
namespace {

// A SQL string literal (the runbook's statements are meant to be pasted).
std::string literal(const std::string& text) {
    std::string out = "'";
    for (char ch : text) {
        if (ch == '\'') out += '\'';
        out += ch;
    }
    return out + "'";
}

}  // namespace

std::string history_lost_runbook(const std::string& table, const std::string& processor, int range, bool latest_version,
                                 LostBecause why, const std::string& server_message) {
    const std::string args = literal(table) + ", " + literal(processor);
    std::string out;
    out += "HISTORY LOST: processor \"" + processor + "\" on " + table + ", range " + std::to_string(range) +
           " halted (state history_lost); it will not restart from now by itself.\n";
    switch (why) {
    case LostBecause::retention:
        out += "What was lost: retention dropped changes written after this range's checkpoint, before the"
               " processor read them; they cannot be read again.";
        break;
    case LostBecause::other_database:
        out += "What was lost: the checkpoint was taken in another database or cluster (this database was"
               " restored from a dump or cloned); this database's log does not hold the changes after it.";
        break;
    case LostBecause::capture_disabled:
        out += "What was lost: capture of the table was disabled (changefeed.disable()) and enabled again after"
               " this range's checkpoint; writes made in between were never logged.";
        break;
    case LostBecause::invalid_position:
        out += "What was lost: the checkpoint is not a valid position here (stored before an upgrade of"
               " changefeed, or damaged); the feed cannot say which changes came after it.";
        break;
    case LostBecause::other_history:
        out += "What was lost: the checkpoint was taken on a history this server did not follow (a"
               " point-in-time restore, a standby promoted from an earlier point); reading on from it could"
               " skip changes of this history (docs/runbooks/position-other-history.md).";
        break;
    case LostBecause::keys_only:
        out += "What was lost: the collection was switched to log keys alone (changefeed.alter(..., images =>"
               " 'keys')); the versions of changes logged since are not in the log, and this feed reads every"
               " version. If no change was logged meanwhile, switching it back (images => 'full') and starting"
               " the processor again reads on with nothing lost.";
        break;
    }
    // Only retention, a disabled capture and keys alone leave versions out of
    // the log; otherwise what the range had not read is still there to read.
    const bool gone_from_log = why == LostBecause::retention || why == LostBecause::capture_disabled ||
                               why == LostBecause::keys_only;
    out += " Server: " + server_message + "\n";
    out += "Runbook (docs/runbooks/history-lost.md), as the processor's owning role or a changefeed_admin:\n";
    out += "  1. See what is affected: SELECT * FROM changefeed.horizons WHERE table_name = " + literal(table) +
           "::regclass; SELECT * FROM changefeed.lag(" + args + ");\n";
    if (latest_version) {
        out += "  2. Rebuild from the table, which holds every document's current version: restart the processor"
               " with the resync option (re-reads the range as a backfill, then continues), or stop it, forget"
               " its leases and checkpoints (SELECT changefeed.drop_processor(" +
               args + ");) and start it with start_from_beginning.\n";
    } else if (!gone_from_log) {
        out += "  2. The changes after it are still in this log: do not move the processor to now. Resume it from"
               " the time of the last change it handled (duplicates, never a gap): SELECT"
               " changefeed.reset_checkpoint(" +
               args + ", \"position\" => changefeed.position_at(" + literal(table) +
               ", '<time of the last change it handled>'));\n";
    } else {
        out += "  2. The intermediate versions and deletes in the gap are gone for good: record the gap for the"
               " consumers of this feed, reconcile from the table if the data owner accepts it, then move the"
               " processor's checkpoints to now (SELECT changefeed.reset_checkpoint(" +
               args + ");); running instances are fenced and continue from there.\n";
    }
    if (why == LostBecause::keys_only)
        out += "  3. Prevent it: switch a collection to keys alone only once no processor reads all its versions"
               " (SELECT changefeed.drop_processor(" +
               args + ");).";
    else
        out += "  3. Prevent it: alert on changefeed.lag(...).retention_used, raise the retention with"
               " changefeed.alter(" +
               literal(table) + ", retention => ...).";
    return out;
}

}  // namespace changefeed::detail
