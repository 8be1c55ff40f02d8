// The windows of a read (window_plan.hpp).
#include "pg.hpp"
#include "read/window_plan.hpp"

extern "C" {
#include "access/genam.h"
#include "access/itup.h"
#include "access/relscan.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"
}

namespace changefeed::read {

int32 count_window(int32 collection, const int32 *ranges, int nranges, const PgSnapshot *lo, const PgSnapshot *upto,
                   Partition *parts, int nparts, int32 stop_at) {
    int32 count = 0;
    ScanKeyData keys[4];
    for (int i = 0; i < nparts && count < stop_at; i++) {
        Partition *p = &parts[i];
        for (int r = 0; r < nranges && count < stop_at; r++) {
            for (int64 x = -1; x < (int64)lo->nxip && count < stop_at; x++) {
                int nkeys;
                if (x < 0) {
                    if (!FullTransactionIdPrecedes(lo->xmax, upto->xmax)) continue;
                    nkeys = scan_keys(keys, collection, ranges[r], lo->xmax, upto->xmax);
                } else {
                    nkeys = scan_keys(keys, collection, ranges[r], lo->xip[x], InvalidFullTransactionId);
                }
                IndexScanDesc scan = index_beginscan(p->heap, p->index, SnapshotAny, nkeys, 0);
                scan->xs_want_itup = true;
                index_rescan(scan, keys, nkeys, NULL, 0);
                while (count < stop_at && index_getnext_tid(scan, ForwardScanDirection) != NULL) {
                    bool isnull;
                    Datum d = index_getattr(scan->xs_itup, 3, scan->xs_itupdesc, &isnull);
                    if (!isnull && pg_snapshot_visible(upto, DatumGetFullTransactionId(d))) count++;
                }
                index_endscan(scan);
                CHECK_FOR_INTERRUPTS();
            }
        }
    }
    return count;
}

namespace {

// A lookup of changefeed.tick, prepared once a backend.
SPIPlanPtr tick_plan(const char *order_and_offset) {
    Oid types[3] = {TEXTOID, TEXTOID, INT4OID};
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT t.snap FROM changefeed.tick t"
             " WHERE t.snap_xmax > $1::pg_catalog.xid8 AND t.snap_xmax <= $2::pg_catalog.xid8 %s",
             order_and_offset);
    SPIPlanPtr plan = SPI_prepare(sql, 3, types);
    if (plan == NULL || SPI_keepplan(plan) != 0) elog(ERROR, "changefeed: cannot prepare the tick lookup");
    return plan;
}

}  // namespace

const PgSnapshot *tick_after(const PgSnapshot *lo, const PgSnapshot *upto, int32 offset) {
    static SPIPlanPtr nth = NULL, last = NULL;
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    if (nth == NULL) nth = tick_plan("ORDER BY t.snap_xmax OFFSET $3 LIMIT 1");
    if (last == NULL) last = tick_plan("AND $3 IS NOT NULL ORDER BY t.snap_xmax DESC LIMIT 1");
    char from[32], to[32];
    snprintf(from, sizeof from, UINT64_FORMAT, U64FromFullTransactionId(lo->xmax));
    snprintf(to, sizeof to, UINT64_FORMAT, U64FromFullTransactionId(upto->xmax));
    Datum args[3] = {CStringGetTextDatum(from), CStringGetTextDatum(to), Int32GetDatum(offset)};
    const PgSnapshot *found = NULL;
    SPIPlanPtr plans[2] = {nth, last};
    for (int i = 0; i < 2 && found == NULL; i++) {
        if (SPI_execute_plan(plans[i], args, NULL, true, 1) != SPI_OK_SELECT)
            elog(ERROR, "changefeed: tick lookup failed");
        if (SPI_processed == 0) continue;
        bool isnull;
        Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        // Unpacked (a short varlena header in the tuple) and copied out of
        // SPI's memory into the caller's.
        if (!isnull)
            found = (const PgSnapshot *)DatumGetPointer(SPI_datumTransfer(PointerGetDatum(PG_DETOAST_DATUM(d)), false,
                                                                          -1));
    }
    SPI_finish();
    return found;
}

}  // namespace changefeed::read
