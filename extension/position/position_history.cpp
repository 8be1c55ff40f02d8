// Positions know their history: each is encoded with the timeline and a WAL
// position L of the server that encoded it (position_codec.hpp), and a read
// on any server of the cluster checks that the server's own history contains
// that point.
//
// Why that is enough: the snapshots a position holds were taken before it was
// encoded, so every transaction it counts as completed has its commit or abort
// record below L.  A server whose history contains (timeline, L) replayed all
// of those records with the same outcome, so none of those transaction ids can
// be handed out again there; the ones the position counts as not yet visible
// are read later whatever they become.  A server whose history forked before L
// (a point-in-time restore, a standby promoted from an earlier point) may have
// reused those ids for other transactions: a read would skip them, so the
// position is refused (CF017).  A checkpoint stored in the database always
// passes after a failover: the transaction that stored it committed after L.
//
// L is GetXLogInsertRecPtr() on a primary (every record inserted so far) and
// GetXLogReplayRecPtr() on a hot standby (every record replayed so far, which
// is what its snapshots are made of).
#include "pg.hpp"
#include "position/position_codec.hpp"
#include "position/position_history.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "access/timeline.h"
#include "access/xlog.h"
#include "access/xlogrecovery.h"
#include "nodes/pg_list.h"
}

static ChangefeedWalPoint wal_point(bool *standby) {
    ChangefeedWalPoint at;
    *standby = RecoveryInProgress();
    if (*standby) {
        TimeLineID tli = 0;
        at.lsn = GetXLogReplayRecPtr(&tli);
        at.timeline = tli;
    } else {
        at.lsn = GetXLogInsertRecPtr();
        at.timeline = GetWALInsertionTimeLine();
    }
    return at;
}

ChangefeedWalPoint changefeed_wal_point(void) {
    bool standby;
    return wal_point(&standby);
}

// One timeline's stretch of a history: [begin, end), end 0 for the newest.
struct HistoryEntry {
    uint32 tli;
    uint64 begin;
    uint64 end;
};

// The history of one timeline, cached per backend: a history file never
// changes once written.
static uint32 cached_tli = 0;
static HistoryEntry *cached_history = NULL;
static int cached_entries = 0;

static const HistoryEntry *history_of(uint32 tli, int *n) {
    if (tli != cached_tli || cached_history == NULL) {
        List *history = readTimeLineHistory(tli);  // in pg_wal; newest first
        int count = list_length(history);
        HistoryEntry *entries = (HistoryEntry *)MemoryContextAlloc(TopMemoryContext, sizeof(HistoryEntry) * count);
        int i = 0;
        ListCell *lc;
        foreach (lc, history) {
            TimeLineHistoryEntry *e = (TimeLineHistoryEntry *)lfirst(lc);
            entries[i].tli = e->tli;
            entries[i].begin = e->begin;
            entries[i].end = e->end;
            i++;
        }
        list_free_deep(history);
        if (cached_history != NULL) pfree(cached_history);
        cached_history = entries;
        cached_entries = count;
        cached_tli = tli;
    }
    *n = cached_entries;
    return cached_history;
}

// Whether the history of timeline `tli` holds `at`: at.timeline is one of
// its ancestors and at.lsn lies no later than where the history left it, or
// at.timeline is `tli` itself and at.lsn no later than `upto`.
static bool history_holds(uint32 tli, uint64 upto, ChangefeedWalPoint at) {
    if (at.timeline == tli) return at.lsn <= upto;
    int n;
    const HistoryEntry *h = history_of(tli, &n);
    for (int i = 0; i < n; i++)
        if (h[i].tli == at.timeline) return h[i].end != InvalidXLogRecPtr && at.lsn <= h[i].end;
    return false;
}

static void refuse_other_history(ChangefeedWalPoint at, ChangefeedWalPoint here) {
    ereport(ERROR,
            (errcode(changefeed::kOtherHistory), errmsg("position belongs to a history this server did not follow"),
             errdetail("The position was taken at %X/%X on timeline %u; this server, on timeline %u, left that "
                       "history before that point or never was on it (a point-in-time restore, or a standby "
                       "promoted from an earlier point). Transactions the position counts as read may have "
                       "been replaced by others here.",
                       (uint32)(at.lsn >> 32), (uint32)at.lsn, at.timeline, here.timeline),
             errhint("Resume the consumer from a checkpoint taken on this server's history, or from "
                     "changefeed.position_at() a time before the restore point; do not reset it to now, "
                     "which would skip what was written since. See docs/runbooks/position-other-history.md.")));
}

static void refuse_not_replayed(ChangefeedWalPoint at, ChangefeedWalPoint here) {
    ereport(ERROR, (errcode(changefeed::kNotReplayedYet), errmsg("this standby has not replayed the position yet"),
                    errdetail("The position was taken at %X/%X on timeline %u; this standby has replayed up to %X/%X "
                              "on timeline %u.",
                              (uint32)(at.lsn >> 32), (uint32)at.lsn, at.timeline, (uint32)(here.lsn >> 32),
                              (uint32)here.lsn, here.timeline),
                    errhint("Retry once the standby has caught up, or read from the primary. See "
                            "docs/runbooks/position-not-replayed.md.")));
}

void changefeed_check_history(ChangefeedWalPoint at) {
    if (at.timeline == 0) return;  // a version 2 position: no history to check
    bool standby;
    ChangefeedWalPoint here = wal_point(&standby);
    if (at.timeline == here.timeline) {
        // On a primary a position of its own timeline passes whatever its
        // WAL position: the insert position it carries counts WAL not yet
        // flushed, which a crash loses, so a position handed out just before
        // a crash would be refused for good on an idle server.  The check
        // against the next transaction id (position.cpp) refuses it while its
        // transactions could be handed out again here.
        if (at.lsn <= here.lsn || !standby) return;
        refuse_not_replayed(at, here);
    }
    if (history_holds(here.timeline, here.lsn, at)) return;
    // A standby that has not followed its primary onto a newer timeline yet:
    // it has not heard of that timeline, or the timeline's history leads
    // through what this standby has replayed.
    if (standby && at.timeline > here.timeline &&
        (!existsTimeLineHistory(at.timeline) || history_holds(at.timeline, InvalidXLogRecPtr, here)))
        refuse_not_replayed(at, here);
    refuse_other_history(at, here);
}
