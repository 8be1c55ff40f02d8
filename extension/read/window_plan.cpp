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

namespace {

Datum plan_value(HeapTuple tuple, TupleDesc desc, int col, bool *isnull) {
    Datum d = SPI_getbinval(tuple, desc, col, isnull);
    if (*isnull) return (Datum)0;
    Form_pg_attribute att = TupleDescAttr(desc, col - 1);
    if (att->attlen == -1) d = PointerGetDatum(PG_DETOAST_DATUM(d));  // unpacked, then copied out of SPI's memory
    return SPI_datumTransfer(d, att->attbyval, att->attlen);
}

}  // namespace

RangesPlan plan_ranges(FunctionCallInfo fcinfo) {
    static SPIPlanPtr plan = NULL;
    RangesPlan out = {};
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    if (plan == NULL) {
        Oid types[6] = {REGCLASSOID, INT4ARRAYOID, TEXTARRAYOID, INT4OID, TEXTOID, TEXTOID};
        plan = SPI_prepare("SELECT collection_id, tenants, pos, rs, lo, hi, last_seq, upto"
                           "  FROM changefeed.read_ranges_plan($1, $2, $3, $4, $5, $6)",
                           6, types);
        if (plan == NULL || SPI_keepplan(plan) != 0) elog(ERROR, "changefeed: cannot prepare read_ranges_plan()");
    }
    Datum args[6];
    char nulls[7] = "      ";
    for (int i = 0; i < 6; i++) {
        args[i] = PG_ARGISNULL(i) ? (Datum)0 : PG_GETARG_DATUM(i);
        if (PG_ARGISNULL(i)) nulls[i] = 'n';
    }
    if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_SELECT)
        elog(ERROR, "changefeed: read_ranges_plan() failed");
    out.ngroups = (int)SPI_processed;
    out.groups = (RangeGroup *)SPI_palloc(sizeof(RangeGroup) * Max(out.ngroups, 1));
    TupleDesc desc = SPI_tuptable->tupdesc;
    for (int i = 0; i < out.ngroups; i++) {
        HeapTuple t = SPI_tuptable->vals[i];
        bool isnull;
        if (i == 0) {
            out.collection = DatumGetInt32(plan_value(t, desc, 1, &isnull));
            Datum tenants = plan_value(t, desc, 2, &isnull);
            out.tenants = isnull ? NULL : DatumGetArrayTypeP(tenants);
        }
        RangeGroup *g = &out.groups[i];
        g->pos = DatumGetTextPP(plan_value(t, desc, 3, &isnull));
        ArrayType *rs = DatumGetArrayTypeP(plan_value(t, desc, 4, &isnull));
        g->nranges = ArrayGetNItems(ARR_NDIM(rs), ARR_DIMS(rs));
        g->ranges = (int32 *)ARR_DATA_PTR(rs);  // int4, no nulls (checked by the plan)
        g->lo = (const PgSnapshot *)DatumGetPointer(plan_value(t, desc, 5, &isnull));
        Datum hi = plan_value(t, desc, 6, &isnull);
        g->hi = isnull ? NULL : (const PgSnapshot *)DatumGetPointer(hi);
        g->last_seq = DatumGetInt64(plan_value(t, desc, 7, &isnull));
        g->upto = DatumGetFullTransactionId(plan_value(t, desc, 8, &isnull));
    }
    SPI_finish();
    return out;
}

}  // namespace changefeed::read
