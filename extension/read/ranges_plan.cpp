// The plan of a read_ranges() call (ranges_plan.hpp).
//
// Every wake-up of a consumer plans its read, so the common call is planned
// here: a few index lookups and an ACL check, no statement started.
// changefeed.read_ranges_plan() (PL/pgSQL) stays the definition: each of its
// eight statements costs 10-50 us of executor start-up, and it raises every
// error.  Any call out of the common way goes to it: one it would refuse
// (arguments, rights, a table not enabled, history lost), a read by tenant,
// a database with tenant bindings, a reader with SELECT on some columns only.
// So the fast path can only agree with it, or step aside.
#include "pg.hpp"
#include "access/caller.hpp"
#include "position/position.hpp"
#include "read/ranges_plan.hpp"
#include "read/window_scan.hpp"

extern "C" {
#include "access/genam.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "utils/acl.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/varlena.h"
#include "utils/xid8.h"
}

namespace changefeed::read {

namespace {

// What the plan needs of changefeed.collection's row.
struct Collection {
    int32 id;
    int32 ranges;
    bool keys_only;  // images => 'keys'
};

// The row of `key` in catalog table `table` by its unique index `index` on
// column `column` (a heap scan when the index is not there as expected);
// fn(tuple, desc, arg) reads it.  False when there is no such row.
template <typename Read>
bool catalog_row(Oid ns, const char *table, const char *index, const char *column, RegProcedure eq, Datum key,
                 Snapshot snap, Read fn) {
    Oid relid = get_relname_relid(table, ns);
    if (!OidIsValid(relid)) return false;
    AttrNumber att = get_attnum(relid, column);
    if (att == InvalidAttrNumber) return false;
    Oid index_oid = get_relname_relid(index, ns);
    if (OidIsValid(index_oid)) {
        HeapTuple ix = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index_oid));
        bool fits = HeapTupleIsValid(ix) && ((Form_pg_index)GETSTRUCT(ix))->indrelid == relid &&
                    ((Form_pg_index)GETSTRUCT(ix))->indnatts == 1 &&
                    ((Form_pg_index)GETSTRUCT(ix))->indkey.values[0] == att;
        if (HeapTupleIsValid(ix)) ReleaseSysCache(ix);
        if (!fits) index_oid = InvalidOid;
    }
    Relation rel = table_open(relid, AccessShareLock);
    ScanKeyData sk;
    ScanKeyInit(&sk, att, BTEqualStrategyNumber, eq, key);
    SysScanDesc scan = systable_beginscan(rel, index_oid, OidIsValid(index_oid), snap, 1, &sk);
    HeapTuple tuple = systable_getnext(scan);
    bool found = HeapTupleIsValid(tuple) && fn(tuple, RelationGetDescr(rel));
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return found;
}

Datum column_of(HeapTuple tuple, TupleDesc desc, const char *name, bool *isnull) {
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
            return heap_getattr(tuple, i + 1, desc, isnull);
    }
    *isnull = true;
    return (Datum)0;
}

// The collection of `tbl` while it captures: false when it is not enabled,
// or disabled with its state kept.
bool enabled_collection(Oid ns, Oid tbl, Snapshot snap, Collection *c) {
    return catalog_row(ns, "collection", "collection_relid_key", "relid", F_OIDEQ, ObjectIdGetDatum(tbl), snap,
                       [c](HeapTuple t, TupleDesc desc) {
                           bool id_null, ranges_null, images_null, disabled_null;
                           Datum id = column_of(t, desc, "id", &id_null);
                           Datum ranges = column_of(t, desc, "ranges", &ranges_null);
                           Datum images = column_of(t, desc, "images", &images_null);
                           (void)column_of(t, desc, "disabled_at", &disabled_null);
                           if (id_null || ranges_null || images_null || !disabled_null) return false;
                           c->id = DatumGetInt32(id);
                           c->ranges = DatumGetInt32(ranges);
                           text *images_text = DatumGetTextPP(images);
                           c->keys_only = VARSIZE_ANY_EXHDR(images_text) != 4 ||
                                          memcmp(VARDATA_ANY(images_text), "full", 4) != 0;
                           return true;
                       });
}

// Whether any role is bound to a tenant (tenants_of() then decides).
bool any_tenant_binding(Oid ns, Snapshot snap) {
    Oid relid = get_relname_relid("tenant_binding", ns);
    if (!OidIsValid(relid)) return true;
    Relation rel = table_open(relid, AccessShareLock);
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, snap, 0, NULL);
    bool any = HeapTupleIsValid(systable_getnext(scan));
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return any;
}

// The newest transaction whose changes retention dropped or capture missed,
// when there is one.
bool horizon_of(Oid ns, int32 collection, Snapshot snap, FullTransactionId *dropped) {
    return catalog_row(ns, "horizon", "horizon_pkey", "collection_id", F_INT4EQ, Int32GetDatum(collection), snap,
                       [dropped](HeapTuple t, TupleDesc desc) {
                           bool isnull;
                           Datum d = column_of(t, desc, "dropped_txid", &isnull);
                           if (isnull) return false;
                           *dropped = DatumGetFullTransactionId(d);
                           return true;
                       });
}

// snapshot_covers() (maintenance/retention.sql).
bool snapshot_covers(const PgSnapshot *lo, FullTransactionId upto) {
    if (!FullTransactionIdPrecedes(upto, lo->xmax)) return false;
    for (uint32 i = 0; i < lo->nxip; i++)
        if (!FullTransactionIdPrecedes(upto, lo->xip[i])) return false;
    return true;
}

// A one-dimensional array without nulls, deconstructed.
bool elements_of(FunctionCallInfo fcinfo, int n, Oid type, int16 len, bool byval, char align, Datum **elems,
                 int *count) {
    ArrayType *arr = PG_GETARG_ARRAYTYPE_P(n);
    if (ARR_NDIM(arr) > 1 || array_contains_nulls(arr)) return false;
    deconstruct_array(arr, type, len, byval, align, elems, NULL, count);
    return true;
}

// A distinct position text of the call, decoded, and the group it falls in.
struct Given {
    text *pos;
    const PgSnapshot *lo;
    const PgSnapshot *hi;
    int64 last_seq;
    int group;
};

int by_bytes(const text *a, const text *b) {
    if (VARSIZE(a) != VARSIZE(b)) return VARSIZE(a) < VARSIZE(b) ? -1 : 1;
    return memcmp(VARDATA(a), VARDATA(b), VARSIZE(a) - VARHDRSZ);
}

// Indexes of positions by their bytes.
int by_position_bytes(const void *a, const void *b, void *arg) {
    text *const *texts = (text *const *)arg;
    return by_bytes(texts[*(const int *)a], texts[*(const int *)b]);
}

int by_snapshot(const PgSnapshot *a, const PgSnapshot *b) {
    if (a == NULL || b == NULL) return a == b ? 0 : a == NULL ? -1 : 1;
    if (VARSIZE(a) != VARSIZE(b)) return VARSIZE(a) < VARSIZE(b) ? -1 : 1;
    return memcmp(a, b, VARSIZE(a));
}

// Decoded positions by what they hold: (lo, hi, last_seq).
int by_decoded(const void *a, const void *b) {
    const Given *x = *(Given *const *)a, *y = *(Given *const *)b;
    int c = by_snapshot(x->lo, y->lo);
    if (c == 0) c = by_snapshot(x->hi, y->hi);
    if (c == 0 && x->last_seq != y->last_seq) c = x->last_seq < y->last_seq ? -1 : 1;
    return c;
}

// The texts' order under the database's collation, as min() and ORDER BY
// in read_ranges_plan() have it.
int collated(const text *a, const text *b) {
    return varstr_cmp(VARDATA_ANY(a), (int)VARSIZE_ANY_EXHDR(a), VARDATA_ANY(b), (int)VARSIZE_ANY_EXHDR(b),
                      DEFAULT_COLLATION_OID);
}

int by_xid(FullTransactionId a, FullTransactionId b) {
    return FullTransactionIdPrecedes(a, b) ? -1 : FullTransactionIdPrecedes(b, a) ? 1 : 0;
}

// read_ranges_plan()'s order: ORDER BY pg_snapshot_xmax(lo), hi IS NOT
// NULL, pg_snapshot_xmax(hi), last_seq, pos.
int by_plan_order(const void *a, const void *b) {
    const RangeGroup *x = (const RangeGroup *)a, *y = (const RangeGroup *)b;
    int c = by_xid(x->lo->xmax, y->lo->xmax);
    if (c != 0) return c;
    if ((x->hi != NULL) != (y->hi != NULL)) return x->hi == NULL ? -1 : 1;
    if (x->hi != NULL && (c = by_xid(x->hi->xmax, y->hi->xmax)) != 0) return c;
    if (x->last_seq != y->last_seq) return x->last_seq < y->last_seq ? -1 : 1;
    return collated(x->pos, y->pos);
}

// The fast plan, or false when the call is not in the common way.
bool plan_common(FunctionCallInfo fcinfo, RangesPlan *out) {
    for (int i = 0; i < 5; i++)
        if (PG_ARGISNULL(i)) return false;
    if (!PG_ARGISNULL(5)) return false;  // a read by tenant
    const Oid tbl = PG_GETARG_OID(0);
    const int32 max_changes = PG_GETARG_INT32(3);
    if (max_changes < 1 || max_changes > 100000) return false;
    const char *mode = text_to_cstring(PG_GETARG_TEXT_PP(4));
    const bool latest = strcmp(mode, "latest") == 0;
    if (!latest && strcmp(mode, "all") != 0 && strcmp(mode, "all_with_schema") != 0) return false;

    Datum *ranges_in, *positions_in;
    int nranges, npositions;
    if (!elements_of(fcinfo, 1, INT4OID, 4, true, TYPALIGN_INT, &ranges_in, &nranges)) return false;
    if (!elements_of(fcinfo, 2, TEXTOID, -1, false, TYPALIGN_INT, &positions_in, &npositions)) return false;
    const bool shared = npositions == 1 && nranges > 1;
    if (nranges != npositions && !shared) return false;

    // The rights: SELECT on the whole table (some columns: the definition
    // checks which).
    bool missing = false;
    if (pg_class_aclcheck_ext(tbl, changefeed_current_caller(), ACL_SELECT, &missing) != ACLCHECK_OK || missing)
        return false;

    Oid ns = get_namespace_oid("changefeed", true);
    if (!OidIsValid(ns)) return false;
    // The catalog as a statement of the definition would see it.
    PushActiveSnapshot(GetTransactionSnapshot());
    Snapshot snap = GetActiveSnapshot();
    Collection c;
    FullTransactionId dropped = InvalidFullTransactionId;
    bool common = enabled_collection(ns, tbl, snap, &c) && !(c.keys_only && !latest) && !any_tenant_binding(ns, snap);
    bool has_horizon = common && horizon_of(ns, c.id, snap, &dropped);
    PopActiveSnapshot();
    if (!common) return false;

    // Ranges within the collection's, none twice.
    int32 *ranges = (int32 *)palloc(sizeof(int32) * Max(nranges, 1));
    for (int i = 0; i < nranges; i++) {
        ranges[i] = DatumGetInt32(ranges_in[i]);
        if (ranges[i] < 0 || ranges[i] >= c.ranges) return false;
    }
    int32 *sorted = (int32 *)palloc(sizeof(int32) * Max(nranges, 1));
    memcpy(sorted, ranges, sizeof(int32) * nranges);
    qsort(sorted, nranges, sizeof(int32), by_int32);
    for (int i = 1; i < nranges; i++)
        if (sorted[i] == sorted[i - 1]) return false;

    out->collection = 0;
    out->tenants = NULL;
    out->ngroups = 0;
    out->groups = (RangeGroup *)palloc(sizeof(RangeGroup) * Max(npositions, 1));
    if (nranges == 0) return true;
    out->collection = c.id;

    // Each distinct text decoded once (a call has few: the ranges of an idle
    // consumer share one), then texts of one (lo, hi, last_seq) grouped.
    text **texts = (text **)palloc(sizeof(text *) * npositions);
    int *order = (int *)palloc(sizeof(int) * npositions);
    for (int i = 0; i < npositions; i++) {
        texts[i] = DatumGetTextP(positions_in[i]);
        order[i] = i;
    }
    qsort_arg(order, npositions, sizeof(int), by_position_bytes, texts);
    Given *given = (Given *)palloc(sizeof(Given) * npositions);
    int ngiven = 0;
    int *given_of = (int *)palloc(sizeof(int) * npositions);
    for (int k = 0; k < npositions; k++) {
        int i = order[k];
        if (ngiven == 0 || by_bytes(given[ngiven - 1].pos, texts[i]) != 0) {
            Datum values[3];
            bool nulls[3];
            changefeed_decode_position(PointerGetDatum(texts[i]), values, nulls);
            Given *g = &given[ngiven++];
            g->pos = texts[i];
            g->lo = (const PgSnapshot *)DatumGetPointer(values[0]);
            g->hi = nulls[1] ? NULL : (const PgSnapshot *)DatumGetPointer(values[1]);
            g->last_seq = DatumGetInt64(values[2]);
        }
        given_of[i] = ngiven - 1;
    }
    Given **by_content = (Given **)palloc(sizeof(Given *) * ngiven);
    for (int k = 0; k < ngiven; k++) by_content[k] = &given[k];
    qsort(by_content, ngiven, sizeof(Given *), by_decoded);
    for (int k = 0; k < ngiven; k++) {
        Given *g = by_content[k];
        if (k > 0 && by_decoded(&by_content[k - 1], &by_content[k]) == 0) {
            RangeGroup *grp = &out->groups[out->ngroups - 1];
            g->group = out->ngroups - 1;
            if (collated(g->pos, grp->pos) < 0) grp->pos = g->pos;  // min(pos)
            continue;
        }
        if (has_horizon && !snapshot_covers(g->lo, dropped)) return false;  // history lost: the definition says how
        RangeGroup *grp = &out->groups[out->ngroups];
        grp->pos = g->pos;
        grp->lo = g->lo;
        grp->hi = g->hi;
        grp->last_seq = g->last_seq;
        grp->upto = (g->hi != NULL ? g->hi : g->lo)->xmax;
        grp->nranges = 0;
        grp->ranges = NULL;
        g->group = out->ngroups++;
    }
    // The ranges of each group, in order.
    for (int j = 0; j < out->ngroups; j++) {
        RangeGroup *grp = &out->groups[j];
        grp->ranges = (int32 *)palloc(sizeof(int32) * nranges);
        if (shared) {
            memcpy(grp->ranges, sorted, sizeof(int32) * nranges);
            grp->nranges = nranges;
            continue;
        }
        for (int i = 0; i < nranges; i++)
            if (given[given_of[i]].group == j) grp->ranges[grp->nranges++] = ranges[i];
        qsort(grp->ranges, grp->nranges, sizeof(int32), by_int32);
    }
    qsort(out->groups, out->ngroups, sizeof(RangeGroup), by_plan_order);
    return true;
}

// read_ranges_plan() through SPI, copied out into the caller's memory.
Datum plan_value(HeapTuple tuple, TupleDesc desc, int col, bool *isnull) {
    Datum d = SPI_getbinval(tuple, desc, col, isnull);
    if (*isnull) return (Datum)0;
    Form_pg_attribute att = TupleDescAttr(desc, col - 1);
    if (att->attlen == -1) d = PointerGetDatum(PG_DETOAST_DATUM(d));  // unpacked, then copied out of SPI's memory
    return SPI_datumTransfer(d, att->attbyval, att->attlen);
}

RangesPlan plan_by_definition(FunctionCallInfo fcinfo) {
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

}  // namespace

RangesPlan plan_ranges(FunctionCallInfo fcinfo) {
    RangesPlan out = {};
    if (plan_common(fcinfo, &out)) return out;
    return plan_by_definition(fcinfo);
}

}  // namespace changefeed::read
