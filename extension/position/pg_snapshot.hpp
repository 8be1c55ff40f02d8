// pg_snapshot values (xid8 snapshots, as pg_current_snapshot() returns them)
// read in C.  Include after pg.hpp.
#pragma once

extern "C" {
#include "access/transam.h"
}

// pg_snapshot's layout (src/backend/utils/adt/xid8funcs.c keeps it private):
// xip sorted, without duplicates, each in [xmin, xmax).
struct PgSnapshot {
    int32 vl_len_;
    uint32 nxip;
    FullTransactionId xmin;
    FullTransactionId xmax;
    FullTransactionId xip[FLEXIBLE_ARRAY_MEMBER];
};

// pg_visible_in_snapshot().
inline bool pg_snapshot_visible(const PgSnapshot *s, FullTransactionId x) {
    if (FullTransactionIdPrecedes(x, s->xmin)) return true;
    if (!FullTransactionIdPrecedes(x, s->xmax)) return false;
    uint32 lo = 0, hi = s->nxip;
    while (lo < hi) {
        uint32 mid = lo + (hi - lo) / 2;
        if (FullTransactionIdEquals(s->xip[mid], x)) return false;
        if (FullTransactionIdPrecedes(s->xip[mid], x))
            lo = mid + 1;
        else
            hi = mid;
    }
    return true;
}

// The active (statement's) snapshot as a pg_snapshot, right on a hot standby
// too, where pg_current_snapshot() lists no transaction in progress
// (position.cpp).
extern "C" PgSnapshot *changefeed_statement_snapshot(void);
