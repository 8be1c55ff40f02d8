// read() in C (read/read.sql): the window loop and the pages, every version or
// the latest ones, with or without a jsonpath filter.
//
// A window is what committed between two snapshots, lo and hi, of one
// collection's ranges.  read() checks the call (rights, position, history)
// in PL/pgSQL and hands the rest to changefeed.read_windows(): choose the
// window (up to now, or up to a tick when the backlog is larger than the
// page), read its page by index scans of the log by (collection, range,
// txid), rows after `after` visible in hi that pass doc_ids, tenants and the
// filter, in seq order, each with the position after it, straight into the
// result; roll over into the next window until the page is full or a window
// up to now was read.  In C because this loop is a processor's drain rate:
// rows go from the index scans straight into the result, with no
// materialized page and no per-row function call but the filter's.
//
// "Not visible in lo" is "txid >= xmax(lo) or txid in xip(lo)": a range scan
// from xmax(lo) and one lookup per xid of xip(lo), so an old open
// transaction costs a lookup, not a rescan of everything since it began.
#include <algorithm>
#include <cmath>

#include "pg.hpp"
#include "access/reader_sight.hpp"
#include "capture/previous_patch.hpp"
#include "capture/xact_tracking.hpp"
#include "position/pg_snapshot.hpp"
#include "position/position.hpp"
#include "position/position_codec.hpp"
#include "position/position_history.hpp"
#include "position/position_key.hpp"
#include "read/current_rows.hpp"
#include "read/read_memory.hpp"
#include "settings.hpp"
#include "sqlstates.hpp"
#include "wake/notifier.hpp"
#include "wake/wait_alone.hpp"

extern "C" {
#include "access/detoast.h"
#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

PG_FUNCTION_INFO_V1(changefeed_read_windows);
PG_FUNCTION_INFO_V1(changefeed_read_ranges);
}

namespace {

PgSnapshot *snapshot_arg(FunctionCallInfo fcinfo, int n) {
    return (PgSnapshot *)PG_DETOAST_DATUM(PG_GETARG_DATUM(n));
}

// changefeed.log's columns, by name: a partition attached from elsewhere may
// number them differently.
enum Column { kSeq, kTxid, kCollection, kRange, kDocId, kPartitionKey, kOp, kCurrent, kPrevious, kTtl, kWrittenAt,
              kTenant, kPreviousTenant, kSchemaVersion, kPreviousPartitionKey, kColumns };
const char *const kColumnNames[kColumns] = {"seq",        "txid",       "collection_id", "range_id", "doc_id",
                                            "partition_key", "op",      "current",       "previous", "ttl_expired",
                                            "written_at", "tenant",     "previous_tenant", "schema_version",
                                            "previous_partition_key"};

struct Partition {
    Relation heap;
    Relation index;  // btree on (collection_id, range_id, txid)
    AttrNumber att[kColumns];
};

// The partitions of changefeed.log with their read index, locked like a query would.
// `locked` (if given): the relations locked here, for unlock_partitions().
Partition *open_partitions(int *count, List **locked = NULL) {
    Oid ns = get_namespace_oid("changefeed", false);
    Oid log = get_relname_relid("log", ns);
    if (!OidIsValid(log)) ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("changefeed.log is missing")));
    List *all = find_all_inheritors(log, AccessShareLock, NULL);
    if (locked != NULL) *locked = list_delete_first(list_copy(all));  // the log itself is not locked here
    Partition *parts = (Partition *)palloc0(sizeof(Partition) * list_length(all));
    int n = 0;
    ListCell *lc;
    foreach (lc, all) {
        Oid relid = lfirst_oid(lc);
        Relation heap = table_open(relid, NoLock);  // locked by find_all_inheritors
        // An empty partition (the days ahead) holds no row our snapshot can
        // see: such a row was inserted, extending the file, before the
        // snapshot was taken, and this check comes after.
        if (heap->rd_rel->relkind == RELKIND_PARTITIONED_TABLE || RelationGetNumberOfBlocks(heap) == 0) {
            table_close(heap, NoLock);
            continue;
        }
        Partition *p = &parts[n];
        p->heap = heap;
        for (int c = 0; c < kColumns; c++) {
            p->att[c] = get_attnum(relid, kColumnNames[c]);
            // A log of release 0.2 (before ALTER EXTENSION UPDATE) has no
            // previous_tenant, and no tenant move (op 'm') either, and no
            // schema versions.
            if (p->att[c] == InvalidAttrNumber && c != kPreviousTenant && c != kSchemaVersion &&
                c != kPreviousPartitionKey)
                ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                                errmsg("changefeed.log partition \"%s\" has no column \"%s\"",
                                       RelationGetRelationName(heap), kColumnNames[c])));
        }
        List *indexes = RelationGetIndexList(heap);
        ListCell *ic;
        foreach (ic, indexes) {
            Relation index = index_open(lfirst_oid(ic), AccessShareLock);
            Form_pg_index ix = index->rd_index;
            if (p->index == NULL && index->rd_rel->relam == BTREE_AM_OID && ix->indisvalid && ix->indnkeyatts >= 3 &&
                ix->indkey.values[0] == p->att[kCollection] && ix->indkey.values[1] == p->att[kRange] &&
                ix->indkey.values[2] == p->att[kTxid] && heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) &&
                heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL))
                p->index = index;
            else
                index_close(index, AccessShareLock);
        }
        if (p->index == NULL)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                            errmsg("changefeed.log partition \"%s\" has no index on (collection_id, range_id, txid)",
                                   RelationGetRelationName(heap)),
                            errhint("Reinstall the extension, or recreate the partition with CREATE TABLE ... "
                                    "PARTITION OF changefeed.log.")));
        n++;
    }
    *count = n;
    return parts;
}

void close_partitions(Partition *parts, int n) {
    for (int i = 0; i < n; i++) {
        index_close(parts[i].index, AccessShareLock);
        table_close(parts[i].heap, NoLock);
    }
}

// Gives back the locks open_partitions() took (what this transaction held
// before stays held: a lock is counted per acquisition).
void unlock_partitions(List *locked) {
    ListCell *lc;
    foreach (lc, locked) UnlockRelationOid(lfirst_oid(lc), AccessShareLock);
}

int by_int32(const void *a, const void *b) {
    int32 x = *(const int32 *)a, y = *(const int32 *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

// The wanted range ids, sorted and without duplicates (a range asked for
// twice is read once).
int32 *range_ids(ArrayType *arr, int *count) {
    Datum *elems;
    bool *nulls;
    int n;
    deconstruct_array(arr, INT4OID, 4, true, TYPALIGN_INT, &elems, &nulls, &n);
    int32 *ids = (int32 *)palloc(sizeof(int32) * Max(n, 1));
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!nulls[i]) ids[k++] = DatumGetInt32(elems[i]);
    qsort(ids, k, sizeof(int32), by_int32);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (u == 0 || ids[u - 1] != ids[i]) ids[u++] = ids[i];
    *count = u;
    return ids;
}

// Scan keys of one index lookup: collection and range equal, txid in [from, to)
// or, with `to` invalid, equal to `from`.
int scan_keys(ScanKeyData *keys, int32 collection, int32 range, FullTransactionId from, FullTransactionId to) {
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(collection));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(range));
    if (!FullTransactionIdIsValid(to)) {
        ScanKeyInit(&keys[2], 3, BTEqualStrategyNumber, F_XID8EQ, FullTransactionIdGetDatum(from));
        return 3;
    }
    ScanKeyInit(&keys[2], 3, BTGreaterEqualStrategyNumber, F_XID8GE, FullTransactionIdGetDatum(from));
    ScanKeyInit(&keys[3], 3, BTLessStrategyNumber, F_XID8LT, FullTransactionIdGetDatum(to));
    return 4;
}

// ---- the page ------------------------------------------------------------------

struct Row {
    int64 seq;
    HeapTuple tuple;
    int part;
    int32 range;
    Datum current;  // jsonb: the document read from the table (current_rows.hpp); 0: the logged one
    char seen;      // what the reader sees of it (reader_sight_op()); 0: what its tenants see (seen_op())
    bool carries;   // it carries its position (read_page())
};

bool seq_before(const Row &a, const Row &b) {
    return a.seq < b.seq;
}

// The rows a page keeps: the `keep` smallest seqs seen so far.  Pruned when
// the array fills up, so a window far larger than the page costs memory for
// about two pages.  Once pruned, a row at or past `bound` cannot be on the
// page: it is passed over before it is copied or filtered, so the pages of a
// window far larger than one (a bulk transaction) cost a scan each, not a
// copy of the rest of the window.
struct Kept {  // a page in the making
    Row *rows;
    int n;
    int cap;
    int keep;
    int64 bound;  // the (keep+1)-th smallest seq seen; PG_INT64_MAX before a prune
};

// Keeps the `keep` smallest seqs (in no order).  std::nth_element and
// std::sort below, inlined on plain structs, are a fraction of qsort()'s
// calls through a comparator.
void page_prune(Kept *pg) {
    if (pg->n <= pg->keep) return;
    std::nth_element(pg->rows, pg->rows + pg->keep, pg->rows + pg->n, seq_before);
    pg->bound = pg->rows[pg->keep].seq;
    for (int i = pg->keep; i < pg->n; i++) heap_freetuple(pg->rows[i].tuple);
    pg->n = pg->keep;
}

// The page's rows in seq order.
void page_sort(Kept *pg) {
    std::sort(pg->rows, pg->rows + pg->n, seq_before);
}

void page_add(Kept *pg, int64 seq, HeapTuple tuple, int part, int32 range, char seen) {
    if (pg->n == pg->cap && pg->keep < pg->n) page_prune(pg);
    if (pg->n == pg->cap) {  // keep >= cap: grow
        pg->cap *= 2;
        pg->rows = (Row *)changefeed_read_buffer_grow(kPageRowsBuffer, pg->rows, sizeof(Row) * pg->cap);
    }
    pg->rows[pg->n++] = Row{seq, tuple, part, range, (Datum)0, seen, false};
}

// A set of texts (doc_ids, tenants): null when the read does not filter.
struct TextSet {
    text **items;
    int n;
};

TextSet text_set_of(ArrayType *arr) {
    TextSet set = {NULL, -1};
    if (arr == NULL) return set;
    Datum *elems;
    bool *nulls;
    deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &set.n);
    set.items = (text **)palloc(sizeof(text *) * Max(set.n, 1));
    int k = 0;
    for (int i = 0; i < set.n; i++)
        if (!nulls[i]) set.items[k++] = DatumGetTextPP(elems[i]);
    set.n = k;
    return set;
}

TextSet text_set(FunctionCallInfo fcinfo, int arg) {
    return text_set_of(PG_ARGISNULL(arg) ? NULL : PG_GETARG_ARRAYTYPE_P(arg));
}

// `value = ANY (set)`: false for a null value, as in SQL.
bool in_set(const TextSet *set, Datum value, bool isnull) {
    if (isnull) return false;
    text *t = DatumGetTextPP(value);
    size_t len = VARSIZE_ANY_EXHDR(t);
    for (int i = 0; i < set->n; i++)
        if (VARSIZE_ANY_EXHDR(set->items[i]) == len && memcmp(VARDATA_ANY(set->items[i]), VARDATA_ANY(t), len) == 0)
            return true;
    return false;
}

// The operation a read scoped to `tenants` sees of a change (0: none, the
// change is not the tenants'): a row that moved from one tenant to another
// (op 'm') is a replace for a read of both or of all, a create (without its
// image from before) for the tenant it went to and a delete (without its
// image after) for the one it left: no tenant sees another's row.  Clears
// pass.
char seen_op(const TextSet *tenants, char op, Datum tenant, bool tenant_null, Datum previous_tenant,
             bool previous_null) {
    if (tenants->n < 0) return op == 'm' ? 'r' : op;
    if (op == 't' || op == 's') return op;
    bool now_in = in_set(tenants, tenant, tenant_null);
    if (op != 'm') return now_in ? op : 0;
    bool was_in = in_set(tenants, previous_tenant, previous_null);
    return now_in ? (was_in ? 'r' : 'c') : (was_in ? 'd' : 0);
}

// A read's jsonpath filter, evaluated by PostgreSQL's own
// jsonb_path_match(document, filter, vars, silent => true), the function a
// filter in SQL would call: a result that is not true (false, null, not a
// boolean, an error the silent mode suppresses) is no match.  Errors silent
// mode does not suppress (vars not an object, a variable missing from vars)
// end the read.  Each evaluation's memory is freed with `scratch`.
struct Filter {
    FmgrInfo match;  // jsonb_path_match(jsonb, jsonpath, jsonb, bool)
    Datum path;
    Datum vars;
    MemoryContext scratch;
};

Filter *filter_of(FunctionCallInfo fcinfo, int path_arg, int vars_arg) {
    if (PG_ARGISNULL(path_arg)) return NULL;
    Filter *f = (Filter *)palloc0(sizeof(Filter));
    fmgr_info(F_JSONB_PATH_MATCH, &f->match);
    f->path = PointerGetDatum(PG_DETOAST_DATUM(PG_GETARG_DATUM(path_arg)));  // unpacked once, not per row
    f->vars = PG_ARGISNULL(vars_arg) ? DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"))
                                     : PointerGetDatum(PG_DETOAST_DATUM(PG_GETARG_DATUM(vars_arg)));
    f->scratch = AllocSetContextCreate(CurrentMemoryContext, "changefeed read filter", ALLOCSET_SMALL_SIZES);
    return f;
}

bool path_matches(Filter *f, Datum document) {
    MemoryContext caller = MemoryContextSwitchTo(f->scratch);
    LOCAL_FCINFO(call, 4);
    InitFunctionCallInfoData(*call, &f->match, 4, InvalidOid, NULL, NULL);
    call->args[0].value = document, call->args[0].isnull = false;
    call->args[1].value = f->path, call->args[1].isnull = false;
    call->args[2].value = f->vars, call->args[2].isnull = false;
    call->args[3].value = BoolGetDatum(true), call->args[3].isnull = false;
    Datum result = FunctionCallInvoke(call);
    bool matches = !call->isnull && DatumGetBool(result);
    MemoryContextSwitchTo(caller);
    MemoryContextReset(f->scratch);
    return matches;
}

// Whether a change the read sees as `seen` (seen_op()) passes the filter:
// creates and replaces are tested on the document after the write, deletes
// (a tenant's side of a move away included) on the one before it when the
// collection keeps previous images (passed through otherwise), clears always
// pass, and so do schema changes.  No filter: every change passes.
bool filter_passes(Filter *f, char seen, Datum current, bool current_null, Datum previous, bool previous_null) {
    if (f == NULL || seen == 't' || seen == 's') return true;
    if (seen == 'd') return previous_null || path_matches(f, previous);
    return !current_null && path_matches(f, current);
}

struct Window {
    int32 collection;
    int32 *ranges;
    int nranges;
    const PgSnapshot *lo;
    const PgSnapshot *hi;
    int64 after;
    TextSet doc_ids;  // n < 0: no filter; clears always pass
    TextSet tenants;
    bool latest;      // mode 'latest': per document the window's last version
    Filter *filter;   // null: none
    // Mode 'latest': the collection's current rows, for the changes logged
    // without images (every change of a collection that logs keys alone).
    CurrentRows *current;
    // What the reader may see of the table's rows (null: all of them).
    ReaderSight *sight;
    // Mode 'all_with_schema': schema changes (op 's') are read too.
    bool with_schema;
};

// A change of every document of its range (a clear or a schema change):
// document and tenant filters pass it.
bool of_every_document(char op) { return op == 't' || op == 's'; }

// The schema version the row's images were written under; one logged
// without it is placed by its seq (reader_version_at()).
int32 version_of(ReaderSight *sight, bool isnull, Datum logged, int64 seq) {
    return isnull ? reader_version_at(sight, seq) : DatumGetInt32(logged);
}

int32 version_in_slot(ReaderSight *sight, Partition *p, TupleTableSlot *slot, int64 seq) {
    bool isnull = true;
    Datum v = p->att[kSchemaVersion] == InvalidAttrNumber ? (Datum)0 : slot_getattr(slot, p->att[kSchemaVersion], &isnull);
    return version_of(sight, isnull, v, seq);
}

int32 version_in_tuple(ReaderSight *sight, Partition *p, HeapTuple tuple, int64 seq) {
    bool isnull = true;
    Datum v = p->att[kSchemaVersion] == InvalidAttrNumber
                  ? (Datum)0
                  : heap_getattr(tuple, p->att[kSchemaVersion], RelationGetDescr(p->heap), &isnull);
    return version_of(sight, isnull, v, seq);
}

// A change logged without images (images => 'keys') cannot be one version of
// the all-versions feed: refused, as read() refuses the collection while it
// logs keys alone, never skipped.  (A create or replace has its image
// otherwise.)
// A reader whose sight is limited (`doc_id` null) is not told which
// document: it may be one its policies hide.
void refuse_no_images(Partition *p, char op, bool current_null, const Datum *doc_id, int64 seq) {
    if (!current_null || (op != 'c' && op != 'r' && op != 'm')) return;
    ereport(ERROR, (errcode(changefeed::kNoImages),
                    doc_id != NULL
                        ? errmsg("a change of document %s was logged without images (images => 'keys')",
                                 TextDatumGetCString(*doc_id))
                        : errmsg("a change was logged without images (images => 'keys')"),
                    errdetail("The all-versions feed cannot deliver it: change %lld in partition \"%s\" of the "
                              "change log holds its key alone.",
                              (long long)seq, RelationGetRelationName(p->heap)),
                    errhint("Read past it in mode 'latest', or resume from a position taken after "
                            "changefeed.alter(tbl, images => 'full').")));
}

// A replace that changed the partition key is logged twice: where the row
// is now (op r or m, with previous_partition_key) and, as op 'x', in the
// range and under the key it had before (capture.cpp).  Both are judged as
// the replace (logical_op()); a reader whose sight the row left (its tenant,
// its policies) gets the delete from the 'x' copy, in the order of the range
// the document was in, and the other sides from the first; everyone else
// skips the copy.
char logical_op(char logged, bool previous_tenant_null) {
    return logged == 'x' ? (previous_tenant_null ? 'r' : 'm') : logged;
}

bool side_kept(bool copy, bool moved, char seen) {
    return copy ? seen == 'd' : !(moved && seen == 'd');
}

void scan_one(const Window *w, Partition *p, int part, int32 range, ScanKeyData *keys, int nkeys,
              TupleTableSlot *slot, Kept *pg) {
    IndexScanDesc scan = index_beginscan(p->heap, p->index, GetActiveSnapshot(), nkeys, 0);
    index_rescan(scan, keys, nkeys, NULL, 0);
    while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
        bool isnull;
        FullTransactionId txid = DatumGetFullTransactionId(slot_getattr(slot, p->att[kTxid], &isnull));
        if (isnull || !pg_snapshot_visible(w->hi, txid)) continue;
        int64 seq = DatumGetInt64(slot_getattr(slot, p->att[kSeq], &isnull));
        if (isnull) continue;
        CHECK_FOR_INTERRUPTS();
        const char logged = DatumGetChar(slot_getattr(slot, p->att[kOp], &isnull));
        if (logged == 's' && !w->with_schema) continue;  // asked for by mode 'all_with_schema' alone
        if (w->latest) {  // coalesced once the whole window is in (latest_versions)
            page_add(pg, seq, ExecCopySlotHeapTuple(slot), part, range, 0);
            continue;
        }
        if (seq <= w->after || seq >= pg->bound) continue;
        const bool copy = logged == 'x';
        if (copy && w->tenants.n < 0 && w->sight == NULL) continue;  // no one's sight to leave
        bool moved = false;
        char op = logged;
        if (copy || logged == 'r' || logged == 'm') {
            bool nul = true;
            if (copy)
                (void)(p->att[kPreviousTenant] != InvalidAttrNumber ? slot_getattr(slot, p->att[kPreviousTenant], &nul)
                                                                    : (Datum)0);
            else if (p->att[kPreviousPartitionKey] != InvalidAttrNumber)
                (void)slot_getattr(slot, p->att[kPreviousPartitionKey], &nul);
            if (copy) op = logical_op(logged, nul);
            else moved = !nul;
        }
        char seen = 0;
        if (w->doc_ids.n >= 0 || w->tenants.n >= 0 || w->filter != NULL || w->sight != NULL) {
            seen = op == 'm' ? 'r' : op;
            bool nul;
            if (!of_every_document(op) && w->tenants.n >= 0) {
                bool prev_nul = true;
                Datum d = slot_getattr(slot, p->att[kTenant], &nul);
                Datum prev = op == 'm' && p->att[kPreviousTenant] != InvalidAttrNumber
                                 ? slot_getattr(slot, p->att[kPreviousTenant], &prev_nul)
                                 : (Datum)0;
                seen = seen_op(&w->tenants, op, d, nul, prev, prev_nul);
                if (seen == 0) continue;
            }
            if (w->sight == NULL && !side_kept(copy, moved, seen)) continue;
            // A change without images cannot be put to the reader's policies:
            // refused whatever its document, before doc_ids, so that the
            // error tells nothing of a document the reader names.
            if (w->sight != NULL && !of_every_document(op)) {
                bool current_null;
                (void)slot_getattr(slot, p->att[kCurrent], &current_null);
                refuse_no_images(p, op, current_null, NULL, seq);
            }
            if (!of_every_document(op) && w->doc_ids.n >= 0) {
                Datum d = slot_getattr(slot, p->att[kDocId], &nul);
                if (!in_set(&w->doc_ids, d, nul)) continue;
            }
            if ((w->filter != NULL || w->sight != NULL) && !of_every_document(seen)) {
                bool current_null, previous_null;
                Datum current = slot_getattr(slot, p->att[kCurrent], &current_null);
                Datum previous = slot_getattr(slot, p->att[kPrevious], &previous_null);
                if (!previous_null && !current_null) previous = changefeed_previous_whole(current, previous);
                // Not filtered out for want of the image it lacks.
                if (w->sight == NULL) {
                    const Datum doc = slot_getattr(slot, p->att[kDocId], &nul);
                    refuse_no_images(p, op, current_null, &doc, seq);
                }
                const int32 version = version_in_slot(w->sight, p, slot, seq);
                seen = reader_sight_op(w->sight, seen, version, current, current_null, previous, previous_null);
                if (seen == 0 || !side_kept(copy, moved, seen)) continue;
                if (w->filter != NULL) {
                    // Tested on what the reader may see of the images.
                    if (!current_null) current = reader_visible_image(w->sight, version, current);
                    if (!previous_null) previous = reader_visible_image(w->sight, version, previous);
                    if (!filter_passes(w->filter, seen, current, current_null, previous, previous_null)) continue;
                }
            }
        }
        page_add(pg, seq, ExecCopySlotHeapTuple(slot), part, range, w->sight != NULL ? seen : 0);
    }
    index_endscan(scan);
}

// Every row of the window after `after`, in `pg` (the smallest seqs).
void scan_window(const Window *w, Partition *parts, int nparts, Kept *pg) {
    FullTransactionId lo_xmax = w->lo->xmax, hi_xmax = w->hi->xmax;
    ScanKeyData keys[4];
    for (int i = 0; i < nparts; i++) {
        Partition *p = &parts[i];
        TupleTableSlot *slot = table_slot_create(p->heap, NULL);
        for (int r = 0; r < w->nranges; r++) {
            const int32 range = w->ranges[r];
            if (FullTransactionIdPrecedes(lo_xmax, hi_xmax))
                scan_one(w, p, i, range, keys, scan_keys(keys, w->collection, range, lo_xmax, hi_xmax), slot, pg);
            for (uint32 x = 0; x < w->lo->nxip; x++)
                scan_one(w, p, i, range, keys,
                         scan_keys(keys, w->collection, range, w->lo->xip[x], InvalidFullTransactionId), slot, pg);
        }
        ExecDropSingleTupleTableSlot(slot);
    }
}

char *snapshot_text(const PgSnapshot *s) {
    return DatumGetCString(DirectFunctionCall1(pg_snapshot_out, PointerGetDatum(s)));
}

text *encode_position(const char *lo, const char *hi, int64 seq, char *buf, size_t buflen) {
    char err[256];
    ChangefeedCodecStatus rc = changefeed_codec_encode(lo, hi, seq, GetSystemIdentifier(), MyDatabaseId,
                                                       changefeed_wal_point(), changefeed_position_key(), buf, buflen,
                                                       err, sizeof err);
    if (rc != CHANGEFEED_CODEC_OK)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cannot encode position: %s", err)));
    return cstring_to_text(buf);
}

text *operation_name(char op) {
    switch (op) {
        case 'c': return cstring_to_text("create");
        case 'r':
        case 'm': return cstring_to_text("replace");
        case 'd': return cstring_to_text("delete");
        case 't': return cstring_to_text("clear");
        case 's': return cstring_to_text("schema");
    }
    return NULL;
}


// Index entries of the window (lo, upto], counted up to stop_at, from the
// index alone: rows of aborted transactions count too, so this is an upper
// bound, good only to choose a window's shape.
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

// The tick `offset` ticks after lo (a larger xmax: it sees all lo sees) and
// at or before `upto`; the last one there when there are fewer; NULL when
// there is none.
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
            found = (const PgSnapshot *)DatumGetPointer(
                SPI_datumTransfer(PointerGetDatum(PG_DETOAST_DATUM(d)), false, -1));
    }
    SPI_finish();
    return found;
}

// ---- the result ------------------------------------------------------------

// Forms read()'s rows into the result set.
struct Emitter {
    ReturnSetInfo *rsinfo;
    const TextSet *tenants;  // the read's tenants (n < 0: not scoped), for seen_op()
    text *last_pos;   // the position after the last row emitted
    char prefix[32];  // "<collection id>."
    int prefix_len;
    Datum *all;       // a deformed log row, sized for the widest partition
    bool *all_null;
    bool all_versions;  // mode 'all': a change needs its logged images
    ReaderSight *sight;  // what the reader may see (null: everything)
    // Rows carry their positions every this many changes of their range
    // (read_ranges(positions_every)), counted in per_range by range id.
    int32 every;
    int32 *per_range;
};

void emitter_init(Emitter *out, int32 collection, Partition *parts, int nparts, ReturnSetInfo *rsinfo,
                  const TextSet *tenants) {
    out->rsinfo = rsinfo;
    out->tenants = tenants;
    out->last_pos = NULL;
    out->prefix_len = snprintf(out->prefix, sizeof out->prefix, "%d.", collection);
    int natts = 1;
    for (int i = 0; i < nparts; i++) natts = Max(natts, RelationGetDescr(parts[i].heap)->natts);
    out->all = (Datum *)palloc(sizeof(Datum) * natts);
    out->all_null = (bool *)palloc(sizeof(bool) * natts);
    out->all_versions = false;
    out->sight = NULL;
    out->every = 1;
    out->per_range = NULL;
}

void emit(Emitter *out, Partition *p, HeapTuple tuple, int64 seq, text *pos, Datum current, char row_seen) {
    TupleDesc desc = RelationGetDescr(p->heap);
    heap_deform_tuple(tuple, desc, out->all, out->all_null);  // once: heap_getattr per column walks the row again
    Datum v[kColumns];
    bool isnull[kColumns];
    for (int c = 0; c < kColumns; c++) {
        if (p->att[c] == InvalidAttrNumber) {  // previous_tenant of a 0.2 log
            v[c] = (Datum)0;
            isnull[c] = true;
            continue;
        }
        v[c] = out->all[p->att[c] - 1];
        isnull[c] = out->all_null[p->att[c] - 1];
        // A value stored out of line goes into the result as a value, not as a
        // pointer into the log's TOAST table.
        if (!isnull[c] && TupleDescAttr(desc, p->att[c] - 1)->attlen == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(v[c])))
            v[c] = PointerGetDatum(detoast_external_attr((struct varlena *)DatumGetPointer(v[c])));
    }
    // The image from before, whole (a replace may store a patch of its image after).
    if (!isnull[kPrevious] && !isnull[kCurrent]) v[kPrevious] = changefeed_previous_whole(v[kCurrent], v[kPrevious]);
    // read()'s 13 columns; read_ranges() has a 14th, resume_ranges, null here.
    Datum values[14];
    bool nulls[14] = {false, false, false, false, false, false, false, false, false, false, false, false, false, true};
    if (current != (Datum)0) {  // the document as it is now: no image from before goes with it
        v[kCurrent] = current;
        isnull[kCurrent] = false;
        isnull[kPrevious] = true;
    } else if (out->all_versions) {
        refuse_no_images(p, DatumGetChar(v[kOp]), isnull[kCurrent], out->sight != NULL ? NULL : &v[kDocId], seq);
    }
    values[0] = v[kSeq];
    values[1] = v[kTxid];
    values[2] = v[kRange];
    // A move is what the read's tenants see of it: the tenant it went to
    // gets a create without the image from before, the one it left a delete
    // without the image after (the scans let nothing else through).
    // Row-level security may turn a replace into either side too
    // (reader_sight_op()).
    const char logged = logical_op(DatumGetChar(v[kOp]), isnull[kPreviousTenant]);
    char seen = row_seen != 0 ? row_seen
                              : seen_op(out->tenants, logged, v[kTenant], isnull[kTenant], v[kPreviousTenant],
                                        isnull[kPreviousTenant]);
    bool moved_out = seen == 'd' && logged == 'm';
    if (out->sight != NULL && seen == 's') {  // the columns the reader may see
        if (!isnull[kCurrent]) v[kCurrent] = reader_visible_schema(out->sight, v[kCurrent]);
    } else if (out->sight != NULL) {
        // A document read from the table has the table's shape now.
        const int32 version = current != (Datum)0 ? kShapeNow
                                                  : version_of(out->sight, isnull[kSchemaVersion], v[kSchemaVersion], seq);
        if (!isnull[kCurrent]) v[kCurrent] = reader_visible_image(out->sight, version, v[kCurrent]);
        if (!isnull[kPrevious]) v[kPrevious] = reader_visible_image(out->sight, version, v[kPrevious]);
        if (!reader_sees_tenant(out->sight)) isnull[kTenant] = isnull[kPreviousTenant] = true;
    }
    text *op = operation_name(seen);
    values[3] = PointerGetDatum(op);
    nulls[3] = op == NULL;
    values[4] = v[kDocId], nulls[4] = isnull[kDocId];
    values[5] = v[kPartitionKey], nulls[5] = isnull[kPartitionKey];
    values[6] = v[kCurrent], nulls[6] = isnull[kCurrent] || seen == 'd';
    values[7] = v[kPrevious], nulls[7] = isnull[kPrevious] || seen == 'c';
    values[8] = v[kTtl], nulls[8] = isnull[kTtl];
    values[9] = v[kWrittenAt], nulls[9] = isnull[kWrittenAt];
    values[10] = moved_out ? v[kPreviousTenant] : v[kTenant];
    nulls[10] = moved_out ? isnull[kPreviousTenant] : isnull[kTenant];
    values[11] = PointerGetDatum(pos);
    nulls[11] = pos == NULL;
    char event_id[96];  // "<collection id>.<txid>.<seq>"
    int len = out->prefix_len;
    memcpy(event_id, out->prefix, len);
    len += pg_ulltoa_n(U64FromFullTransactionId(DatumGetFullTransactionId(v[kTxid])), event_id + len);
    event_id[len++] = '.';
    len += pg_ulltoa_n((uint64)seq, event_id + len);
    // The two sides of a move are two events (a tenant-scoped bridge of each
    // may publish to one stream, deduplicated by id): ".create" / ".delete".
    if ((logged == 'm' || logged == 'r') && (seen == 'c' || seen == 'd')) {
        const char *side = seen == 'c' ? ".create" : ".delete";
        memcpy(event_id + len, side, 7);
        len += 7;
    }
    values[12] = PointerGetDatum(cstring_to_text_with_len(event_id, len));
    values[13] = (Datum)0;
    tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
}

// A marker row of read_ranges(): `ranges` resume at `pos`.
void emit_marker(Emitter *out, text *pos, const int32 *ranges, int nranges) {
    Datum *elems = (Datum *)palloc(sizeof(Datum) * Max(nranges, 1));
    for (int i = 0; i < nranges; i++) elems[i] = Int32GetDatum(ranges[i]);
    Datum values[14] = {};
    bool nulls[14];
    for (int c = 0; c < 14; c++) nulls[c] = true;
    values[11] = PointerGetDatum(pos), nulls[11] = false;
    values[13] = PointerGetDatum(construct_array(elems, nranges, INT4OID, sizeof(int32), true, TYPALIGN_INT));
    nulls[13] = false;
    tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
}

// Mode 'latest': of every row of the window in `pg`, per document the last
// version, unless it is a delete or a later clear of its range ends it; then
// only those after w->after and passing doc_ids, tenants and the filter, in
// seq order.  A version logged without its image (images => 'keys'), and
// every version of a collection that logs keys alone, is the document as it
// is now, read from the table (current_rows.hpp): gone from it, it does not
// appear (as a delete would not); its tenant now is the one the read's
// tenants must hold, and the filter tests it.  Those lookups go in seq order
// and stop once `keep` rows precede the next: what is left is not on the
// page (read_page keeps the `keep` smallest seqs).
struct Version {
    int row;
    int32 range;
    char op;
    text *doc;
    int64 seq;
};

int by_document_then_newest(const void *a, const void *b) {
    const Version *x = (const Version *)a, *y = (const Version *)b;
    if (x->range != y->range) return x->range < y->range ? -1 : 1;
    size_t lx = VARSIZE_ANY_EXHDR(x->doc), ly = VARSIZE_ANY_EXHDR(y->doc);
    int c = memcmp(VARDATA_ANY(x->doc), VARDATA_ANY(y->doc), Min(lx, ly));
    if (c != 0) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x->seq > y->seq ? -1 : x->seq < y->seq ? 1 : 0;
}

bool same_document(const Version *a, const Version *b) {
    size_t len = VARSIZE_ANY_EXHDR(a->doc);
    return a->range == b->range && len == VARSIZE_ANY_EXHDR(b->doc) &&
           memcmp(VARDATA_ANY(a->doc), VARDATA_ANY(b->doc), len) == 0;
}

struct Lookup {  // a version whose document is read from the table
    int64 seq;
    int row;
};

int by_lookup_seq(const void *a, const void *b) {
    int64 x = ((const Lookup *)a)->seq, y = ((const Lookup *)b)->seq;
    return x < y ? -1 : x > y ? 1 : 0;
}

int by_int64(const void *a, const void *b) {
    int64 x = *(const int64 *)a, y = *(const int64 *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

void latest_versions(const Window *w, Partition *parts, Kept *pg, int keep) {
    Version *v = (Version *)palloc_extended(sizeof(Version) * Max(pg->n, 1), MCXT_ALLOC_HUGE);
    int64 *last_clear = (int64 *)palloc0(sizeof(int64) * Max(w->nranges, 1));  // per wanted range, 0: none
    int nv = 0;
    for (int i = 0; i < pg->n; i++) {
        Partition *p = &parts[pg->rows[i].part];
        TupleDesc desc = RelationGetDescr(p->heap);
        HeapTuple t = pg->rows[i].tuple;
        bool isnull;
        char op = DatumGetChar(heap_getattr(t, p->att[kOp], desc, &isnull));
        if (op == 'x') op = 'd';  // the document left this range (for its new one: logical_op())
        int32 range = DatumGetInt32(heap_getattr(t, p->att[kRange], desc, &isnull));
        if (op == 't') {
            int32 *at = (int32 *)bsearch(&range, w->ranges, w->nranges, sizeof(int32), by_int32);
            int64 *clear = &last_clear[at - w->ranges];
            *clear = Max(*clear, pg->rows[i].seq);
            continue;
        }
        Datum doc = heap_getattr(t, p->att[kDocId], desc, &isnull);
        if (isnull) continue;
        v[nv++] = Version{i, range, op, DatumGetTextPP(doc), pg->rows[i].seq};
    }
    qsort(v, nv, sizeof(Version), by_document_then_newest);
    bool *chosen = (bool *)palloc0(sizeof(bool) * Max(pg->n, 1));
    Lookup *from_table = (Lookup *)palloc(sizeof(Lookup) * Max(nv, 1));
    int nfrom = 0;
    bool keys_only = w->current != NULL && current_rows_keys_only(w->current);
    for (int i = 0; i < nv; i++) {
        if (i > 0 && same_document(&v[i], &v[i - 1])) continue;  // an older version
        if (v[i].op == 'd' || v[i].seq <= w->after) continue;
        int32 *at = (int32 *)bsearch(&v[i].range, w->ranges, w->nranges, sizeof(int32), by_int32);
        if (v[i].seq <= last_clear[at - w->ranges]) continue;  // a later clear ends it
        const Row *row = &pg->rows[v[i].row];
        Partition *p = &parts[row->part];
        bool nul;
        if (w->doc_ids.n >= 0 && !in_set(&w->doc_ids, PointerGetDatum(v[i].doc), false)) continue;
        TupleDesc desc = RelationGetDescr(p->heap);
        char seen = v[i].op == 'm' ? 'r' : v[i].op;
        if (w->tenants.n >= 0) {
            // A move away from the read's tenants ends the document as a delete does.
            bool prev_nul = true;
            Datum tenant = heap_getattr(row->tuple, p->att[kTenant], desc, &nul);
            Datum prev = v[i].op == 'm' && p->att[kPreviousTenant] != InvalidAttrNumber
                             ? heap_getattr(row->tuple, p->att[kPreviousTenant], desc, &prev_nul)
                             : (Datum)0;
            seen = seen_op(&w->tenants, v[i].op, tenant, nul, prev, prev_nul);
            if (seen == 0 || seen == 'd') continue;
        }
        if (w->current != NULL && (keys_only || heap_attisnull(row->tuple, p->att[kCurrent], desc))) {
            from_table[nfrom++] = Lookup{v[i].seq, v[i].row};
            continue;
        }
        // The filter tests the latest version: a document whose latest
        // version fails it does not appear, whatever its earlier ones were.
        // So does the reader's sight: a latest version out of it ends the
        // document as a delete does.
        if (w->filter != NULL || w->sight != NULL) {
            bool current_null, previous_null;
            Datum current = heap_getattr(row->tuple, p->att[kCurrent], desc, &current_null);
            Datum previous = heap_getattr(row->tuple, p->att[kPrevious], desc, &previous_null);
            if (!previous_null && !current_null) previous = changefeed_previous_whole(current, previous);
            if (w->sight != NULL) {
                const int32 version = version_in_tuple(w->sight, p, row->tuple, v[i].seq);
                seen = reader_sight_op(w->sight, seen, version, current, current_null, previous, previous_null);
                if (seen == 0 || seen == 'd') continue;
                pg->rows[v[i].row].seen = seen;
                if (!current_null) current = reader_visible_image(w->sight, version, current);
            }
            if (w->filter != NULL && !filter_passes(w->filter, seen, current, current_null, previous, previous_null))
                continue;
        }
        chosen[v[i].row] = true;
    }
    if (nfrom > 0) {
        int64 *logged = (int64 *)palloc(sizeof(int64) * Max(pg->n, 1));  // seqs chosen so far, ascending
        int nlogged = 0;
        for (int i = 0; i < pg->n; i++)
            if (chosen[i]) logged[nlogged++] = pg->rows[i].seq;
        qsort(logged, nlogged, sizeof(int64), by_int64);
        qsort(from_table, nfrom, sizeof(Lookup), by_lookup_seq);
        int below = 0, found = 0;  // chosen rows before the next lookup: logged ones, and found ones
        for (int i = 0; i < nfrom; i++) {
            while (below < nlogged && logged[below] < from_table[i].seq) below++;
            if (below + found >= keep) break;
            Row *row = &pg->rows[from_table[i].row];
            Partition *p = &parts[row->part];
            bool nul;
            Datum doc = heap_getattr(row->tuple, p->att[kDocId], RelationGetDescr(p->heap), &nul);
            Datum document, tenant;
            CHECK_FOR_INTERRUPTS();
            if (!current_row(w->current, DatumGetTextPP(doc), &document, &tenant)) continue;  // gone
            if (w->tenants.n >= 0 && !in_set(&w->tenants, tenant, tenant == (Datum)0)) continue;  // moved away
            if (w->filter != NULL && !path_matches(w->filter, document)) continue;
            row->current = document;
            chosen[from_table[i].row] = true;
            found++;
        }
        pfree(logged);
    }
    pfree(from_table);
    int kept = 0;
    for (int i = 0; i < pg->n; i++) {
        if (chosen[i])
            pg->rows[kept++] = pg->rows[i];
        else
            heap_freetuple(pg->rows[i].tuple);
    }
    pg->n = kept;
    pfree(v);
    pfree(last_clear);
    pfree(chosen);
}

// One page of the window (w->lo, w->hi] after w->after: at most `limit` rows
// into the result.  Returns how many.
int read_page(const Window *w, Partition *parts, int nparts, int32 limit, Emitter *out) {
    Kept pg;
    // One past the page tells whether the window goes on; mode 'latest'
    // needs the whole window first.
    pg.keep = w->latest ? INT_MAX : limit + 1;
    pg.cap = w->latest ? 1024 : Max(2 * pg.keep, 1024);
    pg.n = 0;
    pg.bound = PG_INT64_MAX;
    pg.rows = (Row *)changefeed_read_buffer_take(kPageRowsBuffer, sizeof(Row) * pg.cap);
    scan_window(w, parts, nparts, &pg);
    if (w->latest) {
        latest_versions(w, parts, &pg, limit + 1);
        pg.keep = limit + 1;
    }
    page_prune(&pg);
    page_sort(&pg);

    bool exhausted = pg.n <= limit;
    int n = exhausted ? pg.n : limit;
    char *lo_text = snapshot_text(w->lo);
    char *hi_text = snapshot_text(w->hi);
    // The rows that carry their position: all of them, or every out->every-th
    // change of each range; and the last row, whose position goes to the
    // caller (and a marker) whether it carries it or not.  Their positions,
    // (lo, hi, seq), in one call; the last row of an exhausted window
    // carries hi alone.
    size_t stride = 128 + 8 * (strlen(lo_text) + strlen(hi_text));
    int paged = exhausted ? Max(n - 1, 0) : n;
    int64 *seqs = (int64 *)changefeed_read_buffer_take(kSeqsBuffer, sizeof(int64) * Max(paged, 1));
    int npos = 0;
    for (int i = 0; i < n; i++) {
        Row *row = &pg.rows[i];
        row->carries = out->every <= 1 || ++out->per_range[row->range] % out->every == 0;
        if (i < paged && (row->carries || i == n - 1)) seqs[npos++] = row->seq;
    }
    char *positions = (char *)changefeed_read_buffer_take(kPositionsBuffer, stride * Max(npos, 1));
    char err[256];
    size_t length = 0;
    ChangefeedCodecStatus rc = changefeed_codec_encode_page(lo_text, hi_text, seqs, npos, GetSystemIdentifier(),
                                                            MyDatabaseId, changefeed_wal_point(),
                                                            changefeed_position_key(), positions, stride, &length,
                                                            err, sizeof err);
    if (rc != CHANGEFEED_CODEC_OK)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cannot encode position: %s", err)));
    int next = 0;  // the next of the positions
    for (int i = 0; i < n; i++) {
        Row *row = &pg.rows[i];
        bool last = i == n - 1;
        text *pos = NULL;
        if (i >= paged)
            pos = encode_position(hi_text, NULL, 0, positions, stride);
        else if (row->carries || last)
            pos = cstring_to_text_with_len(positions + (next++) * stride, (int)length);
        if (last) {
            (void)set_config_option("changefeed.read_position", text_to_cstring(pos), PGC_USERSET, PGC_S_SESSION,
                                    GUC_ACTION_LOCAL, true, 0, false);
            out->last_pos = pos;
        }
        emit(out, &parts[row->part], row->tuple, row->seq, row->carries ? pos : NULL, row->current, row->seen);
    }
    for (int i = 0; i < pg.n; i++) heap_freetuple(pg.rows[i].tuple);
    changefeed_read_buffer_give_back(kPageRowsBuffer, pg.rows);
    changefeed_read_buffer_give_back(kPositionsBuffer, positions);
    changefeed_read_buffer_give_back(kSeqsBuffer, seqs);
    return n;
}

// read()'s pages from w (hi null: between windows), window after window:
// at most `remaining` rows into `out`, until the page is full or a window up
// to now was read.  Returns how many.
int32 read_windows_into(Window *w, int32 remaining, Partition *parts, int nparts, Emitter *out) {
    int32 total = 0;
    for (;;) {
        bool at_current = false;
        if (w->hi == NULL) {
            // The next window, up to this statement's snapshot (the one the
            // scans use, so every row visible in it is found).
            const PgSnapshot *now = changefeed_statement_snapshot();
            if (FullTransactionIdPrecedes(now->xmax, w->lo->xmax)) break;  // the position is newer: nothing yet
            // More than the page's backlog is read in windows bounded by
            // ticks (about remaining / tick_rows ticks ahead: one window per
            // page), less in one window up to now.
            if (count_window(w->collection, w->ranges, w->nranges, w->lo, now, parts, nparts, remaining + 1) > remaining)
                w->hi = tick_after(w->lo, now, Max(remaining / changefeed_tick_rows - 1, 0));
            if (w->hi == NULL) {
                w->hi = now;
                at_current = true;
            }
            w->after = 0;
        }
        int n = read_page(w, parts, nparts, remaining, out);
        remaining -= n;
        total += n;
        // Stop when the page is full or a window up to now was read.
        if (remaining == 0 || at_current) break;
        w->lo = w->hi;
        w->hi = NULL;
    }
    return total;
}

// As read() (read/read.sql): our own rows would be visible to our scans.
void refuse_own_changes() {
    if (changefeed_xact_captured())
        ereport(ERROR, (errcode(changefeed::kOwnChanges),
                        errmsg("cannot read the change feed in a transaction that captured changes itself"),
                        errdetail("Its own uncommitted changes would be delivered before they commit.")));
}

// One group of read_ranges(): ranges at one position.
struct RangeGroup {
    text *pos;
    int32 *ranges;
    int nranges;
    const PgSnapshot *lo;
    const PgSnapshot *hi;  // null: between windows
    int64 last_seq;
    FullTransactionId upto;
};

// What read_ranges_plan() (read/read.sql) returns, copied out of SPI.
struct RangesPlan {
    int32 collection;
    ArrayType *tenants;  // null: every tenant
    RangeGroup *groups;
    int ngroups;
};

Datum plan_value(HeapTuple tuple, TupleDesc desc, int col, bool *isnull) {
    Datum d = SPI_getbinval(tuple, desc, col, isnull);
    if (*isnull) return (Datum)0;
    Form_pg_attribute att = TupleDescAttr(desc, col - 1);
    if (att->attlen == -1) d = PointerGetDatum(PG_DETOAST_DATUM(d));  // unpacked, then copied out of SPI's memory
    return SPI_datumTransfer(d, att->attbyval, att->attlen);
}

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
    if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_SELECT) elog(ERROR, "changefeed: read_ranges_plan() failed");
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

extern "C" {

// read_windows(collection_id int, ranges int[], lo pg_snapshot, hi pg_snapshot,
//              after bigint, max_changes int, doc_ids text[], tenants text[],
//              latest bool, filter jsonpath, filter_vars jsonb,
//              as_caller bool) -> read()'s rows
// read() from the position (lo, hi, after) (hi null: between windows): at
// most max_changes rows, window after window, in seq order; with doc_ids or
// tenants (null: all), only changes of those documents or tenants, and
// clears (mode 'all'); with `filter` (null: none), only changes that pass it
// (filter_passes(), vars from filter_vars, null: none); `latest`: per window
// the last version of each document, as read() in mode 'latest'.  Each row
// carries the position after it: the last row of an exhausted window carries
// its `hi` alone, others (lo, hi, seq), so a read resumes after what its
// filters skipped.  The position after the last row goes to
// changefeed.read_position (LOCAL), as read() has always done.  Rows and
// columns are those the caller may see (reader_sight.hpp), unless as_caller
// is false: lag() of an admin, which counts every change.
Datum changefeed_read_windows(PG_FUNCTION_ARGS) {
    for (int i = 0; i < 6; i++)
        if (i != 3 && PG_ARGISNULL(i))
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("argument %d is null", i + 1)));
    // The result set first, in its own memory; the rest in the read's work memory.
    changefeed_read_materialize(fcinfo);
    MemoryContext caller = changefeed_read_work_begin();
    Window w;
    w.collection = PG_GETARG_INT32(0);
    w.ranges = range_ids(PG_GETARG_ARRAYTYPE_P(1), &w.nranges);
    w.lo = snapshot_arg(fcinfo, 2);
    w.hi = PG_ARGISNULL(3) ? NULL : snapshot_arg(fcinfo, 3);
    w.after = PG_GETARG_INT64(4);
    int32 remaining = PG_GETARG_INT32(5);
    if (remaining < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("max_changes must be positive")));
    w.doc_ids = text_set(fcinfo, 6);
    w.tenants = text_set(fcinfo, 7);
    w.latest = !PG_ARGISNULL(8) && PG_GETARG_BOOL(8);
    w.with_schema = !w.latest && PG_NARGS() > 12 && !PG_ARGISNULL(12) && PG_GETARG_BOOL(12);
    w.filter = filter_of(fcinfo, 9, 10);
    refuse_own_changes();
    w.current = w.latest ? current_rows_for(w.collection) : NULL;
    // Counted for an admin (lag()): every change, none of them returned.
    const bool whole = PG_NARGS() > 11 && !PG_ARGISNULL(11) && !PG_GETARG_BOOL(11);
    w.sight = whole ? NULL : reader_sight_for(w.collection);
    if (w.filter != NULL) reader_sight_check_filter(w.sight, w.filter->path);

    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    int nparts;
    Partition *parts = open_partitions(&nparts);
    Emitter out;
    emitter_init(&out, w.collection, parts, nparts, rsinfo, &w.tenants);
    out.all_versions = !w.latest;
    out.sight = w.sight;
    (void)read_windows_into(&w, remaining, parts, nparts, &out);
    reader_sight_close(w.sight, false);
    current_rows_close(w.current);
    close_partitions(parts, nparts);
    changefeed_read_work_end(caller);
    return (Datum)0;
}

}  // extern "C"

namespace {

// read_ranges()'s positions_every (1 when not given).
int32 positions_every_of(FunctionCallInfo fcinfo, int n) {
    if (PG_NARGS() <= n || PG_ARGISNULL(n)) return 1;
    int32 every = PG_GETARG_INT32(n);
    if (every < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("positions_every must be at least 1"),
                        errhint("1 gives every change row its position.")));
    return every;
}

// One read of read_ranges() into the result: the plan (checks included),
// each group with what is left of max_changes, the markers.  Returns the
// number of change rows; *collection is the collection read (0 when no
// range was asked for).  Without `seen`, in the statement's snapshot.  With
// `seen` (a read that waits when it finds nothing): the collection's commit
// count goes there, then the read takes a new snapshot, and the log's
// partitions (and the table, in mode 'latest') are unlocked afterwards.
int32 read_ranges_once(FunctionCallInfo fcinfo, ReturnSetInfo *rsinfo, uint64 *seen, int32 *collection) {
    RangesPlan plan = plan_ranges(fcinfo);  // checked: max_changes and mode are valid
    *collection = plan.collection;
    if (plan.ngroups == 0) return 0;
    refuse_own_changes();
    const bool waits = seen != NULL;
    if (waits) {
        *seen = changefeed_commits_seen(plan.collection);
        PushActiveSnapshot(GetTransactionSnapshot());
    }
    // current_position() in this read's snapshot, our own xid in progress.
    const PgSnapshot *now = (const PgSnapshot *)DatumGetPointer(DirectFunctionCall1(changefeed_snapshot_now, (Datum)0));
    char *now_text = snapshot_text(now);
    size_t now_len = 128 + 8 * strlen(now_text);
    text *now_pos = encode_position(now_text, NULL, 0, (char *)palloc(now_len), now_len);
    const int32 budget = PG_GETARG_INT32(3);
    int32 remaining = budget;
    const char *mode = text_to_cstring(PG_GETARG_TEXT_PP(4));
    const bool latest = strcmp(mode, "latest") == 0;
    const bool with_schema = strcmp(mode, "all_with_schema") == 0;
    TextSet tenants = text_set_of(plan.tenants);
    int nparts;
    List *locked = NIL;
    Partition *parts = open_partitions(&nparts, &locked);
    Emitter out;
    emitter_init(&out, plan.collection, parts, nparts, rsinfo, &tenants);
    out.all_versions = !latest;
    CurrentRows *current = latest ? current_rows_for(plan.collection) : NULL;
    ReaderSight *sight = reader_sight_for(plan.collection);
    out.sight = sight;
    int total_ranges = 0;
    int32 top_range = 0;
    for (int i = 0; i < plan.ngroups; i++) {
        total_ranges += plan.groups[i].nranges;
        for (int r = 0; r < plan.groups[i].nranges; r++) top_range = Max(top_range, plan.groups[i].ranges[r]);
    }
    out.every = positions_every_of(fcinfo, 7);
    if (out.every > 1) out.per_range = (int32 *)palloc0(sizeof(int32) * (top_range + 1));
    int32 *idle = (int32 *)palloc(sizeof(int32) * total_ranges);
    int nidle = 0;
    for (int i = 0; i < plan.ngroups && remaining > 0; i++) {
        const RangeGroup *g = &plan.groups[i];
        Window w;
        w.collection = plan.collection;
        w.ranges = g->ranges;
        w.nranges = g->nranges;
        w.lo = g->lo;
        w.hi = g->hi;
        w.after = g->last_seq;
        w.doc_ids = TextSet{NULL, -1};
        w.tenants = tenants;
        w.latest = latest;
        w.with_schema = with_schema;
        w.filter = NULL;
        w.current = current;
        w.sight = sight;
        out.last_pos = NULL;
        int32 n = read_windows_into(&w, remaining, parts, nparts, &out);
        if (n < remaining && !FullTransactionIdPrecedes(now->xmax, g->upto)) {
            // A read stops short of its budget only at the snapshot: the group
            // resumes there, with the idle ones (so groups come together).
            memcpy(idle + nidle, g->ranges, sizeof(int32) * g->nranges);
            nidle += g->nranges;
            remaining -= n;
            continue;
        }
        remaining -= n;
        // With rows: valid for every range of the group, as rows come in seq
        // order across them (one without rows up to the last row had none
        // before it).  Without: the position is newer than our snapshot.
        emit_marker(&out, n > 0 ? out.last_pos : g->pos, g->ranges, g->nranges);
    }
    if (nidle > 0) {
        qsort(idle, nidle, sizeof(int32), by_int32);
        emit_marker(&out, now_pos, idle, nidle);
    }
    reader_sight_close(sight, waits);
    current_rows_close(current, waits);
    close_partitions(parts, nparts);
    if (waits) {
        unlock_partitions(locked);
        PopActiveSnapshot();
    }
    return budget - remaining;
}

constexpr double kMaxWaitSeconds = 60;


// read_ranges()'s `wait` in milliseconds; 0 for none (null or zero).
long wait_ms_of(FunctionCallInfo fcinfo, int n) {
    if (PG_NARGS() <= n || PG_ARGISNULL(n)) return 0;
    const Interval *wait = PG_GETARG_INTERVAL_P(n);
    double seconds = wait->time / 1e6 + wait->day * (double)SECS_PER_DAY +
                     wait->month * (double)DAYS_PER_MONTH * SECS_PER_DAY;
    if (seconds < 0 || seconds > kMaxWaitSeconds)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("wait must be between 0 and %g seconds", kMaxWaitSeconds),
                        errhint("Call read_ranges() again to wait longer.")));
    return (long)ceil(seconds * 1000);
}

// Where a read cannot wait: no commit would wake it, or it would hold back
// vacuum while it waits.
void check_can_wait(FunctionCallInfo fcinfo) {
    if (!changefeed_commit_wait_available())
        ereport(ERROR, (errcode(changefeed::kNoCommitWakeups),
                        errmsg("read_ranges() cannot wait: changefeed is not in shared_preload_libraries"),
                        errdetail("Commits wake waiting reads through shared memory, which needs the library preloaded."),
                        errhint("Preload the library, or read without wait and LISTEN "
                                "(see docs/runbooks/long-poll-unavailable.md).")));
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(changefeed::kNoCommitWakeups),
                        errmsg("read_ranges() cannot wait on a standby"),
                        errdetail("Commits replayed from the primary wake no waiting read."),
                        errhint("Read without wait and poll (see docs/runbooks/long-poll-unavailable.md).")));
    if (IsolationUsesXactSnapshot())
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("read_ranges() cannot wait in a %s transaction",
                               IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
                        errdetail("Its snapshot would hold back vacuum while it waits, and never see a new commit."),
                        errhint("Wait in a READ COMMITTED transaction, or read without wait.")));
    refuse_own_changes();  // the more telling reason first
    if (FullTransactionIdIsValid(GetTopFullTransactionIdIfAny()))
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("read_ranges() cannot wait in a transaction that has written"),
                        errdetail("Its transaction id would hold back vacuum while it waits."),
                        errhint("Wait in a transaction of its own, or read without wait.")));
    if (!ThereAreNoReadyPortals())
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("read_ranges() cannot wait while a cursor is open"),
                        errdetail("The cursor's snapshot would be left to vacuum while the read waits."),
                        errhint("Close the cursor first, or read without wait.")));
    if (!changefeed_read_is_statement_alone(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("read_ranges() can wait only as a statement of its own"),
                        errdetail("The statement's snapshot is left to vacuum while the read waits, so nothing else "
                                  "may read with it: no other table or subquery, no function that may read tables "
                                  "(volatile, or not immutable and not built in), no call from inside a function."),
                        errhint("Send SELECT * FROM changefeed.read_ranges(...) alone, or read without wait.")));
}

// Lets go of this backend's xmin while it waits, as SnapshotResetXmin()
// does once no snapshot is left: the statement's snapshot is not used again
// (each read after the wait pushes a new one, and GetSnapshotData() sets the
// xmin again).  The catalog snapshot goes first, or it would be reused.
void release_xmin(void) {
    InvalidateCatalogSnapshot();
    MyProc->xmin = InvalidTransactionId;
}

}  // namespace

extern "C" {

// read_ranges(tbl, ranges, positions, max_changes, mode, only_tenant, wait):
// the implementation of changefeed.read_ranges() (read/read.sql says what it
// returns).  read_ranges_plan() checks the call and groups the ranges by
// position, oldest first; each group is read as read() would, with what is
// left of max_changes, its rows straight into the result, then its marker.
// Every read and "now", where idle ranges resume, use one snapshot, the
// statement's (GetActiveSnapshot()), so the call needs no REPEATABLE READ
// transaction: a reader's wake-up is one statement, one round trip.
// With `wait`, each read takes a snapshot of its own; one that finds no
// change sleeps until a commit of the collection wakes it (notifier.cpp),
// holding no xmin and no lock on the log, then reads again by the same
// rules, until it finds changes or `wait` passes; the result is its last
// read's.  The commit count is taken before each read's snapshot: a commit
// that snapshot misses counts up after it, so its wake-up is never lost.
Datum changefeed_read_ranges(PG_FUNCTION_ARGS) {
    changefeed_read_materialize(fcinfo);
    ReturnSetInfo *rsinfo = (ReturnSetInfo *)fcinfo->resultinfo;
    long wait_ms = wait_ms_of(fcinfo, 6);
    (void)positions_every_of(fcinfo, 7);  // checked before anything is read
    int32 collection = 0;
    MemoryContext work_caller = changefeed_read_work_begin();
    if (wait_ms == 0) {
        (void)read_ranges_once(fcinfo, rsinfo, NULL, &collection);
        changefeed_read_work_end(work_caller);
        return (Datum)0;
    }
    check_can_wait(fcinfo);
    const TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), wait_ms);
    // A read that found nothing leaves nothing behind: a reader woken often
    // (commits in ranges it did not ask for) stays small.
    MemoryContext per_read = AllocSetContextCreate(CurrentMemoryContext, "changefeed long-poll read",
                                                   ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller = MemoryContextSwitchTo(per_read);
    for (;;) {
        tuplestore_clear(rsinfo->setResult);  // the markers of the read before
        uint64 seen;
        int32 n = read_ranges_once(fcinfo, rsinfo, &seen, &collection);
        long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
        if (n > 0 || collection == 0 || left <= 0) break;
        release_xmin();
        MemoryContextReset(per_read);
        if (!changefeed_commit_wait(collection, seen, left)) break;  // the markers of the last read stand
    }
    MemoryContextSwitchTo(caller);
    changefeed_read_work_end(work_caller);
    return (Datum)0;
}

}  // extern "C"
