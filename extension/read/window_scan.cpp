// The scans of a read's windows (window_scan.hpp).
#include "pg.hpp"
#include "capture/previous_patch.hpp"
#include "capture/xact_tracking.hpp"
#include "read/read_memory.hpp"
#include "read/window_scan.hpp"
#include "sqlstates.hpp"

#include <algorithm>

extern "C" {
#include "access/genam.h"
#include "access/relscan.h"
#include "access/tableam.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"
}

namespace changefeed::read {

int by_int32(const void *a, const void *b) {
    int32 x = *(const int32 *)a, y = *(const int32 *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

namespace {

bool seq_before(const Row &a, const Row &b) {
    return a.seq < b.seq;
}

}  // namespace

// std::nth_element and std::sort, inlined on plain structs, are a fraction
// of qsort()'s calls through a comparator.
void page_prune(Kept *pg) {
    if (pg->n <= pg->keep) return;
    std::nth_element(pg->rows, pg->rows + pg->keep, pg->rows + pg->n, seq_before);
    pg->bound = pg->rows[pg->keep].seq;
    for (int i = pg->keep; i < pg->n; i++) heap_freetuple(pg->rows[i].tuple);
    pg->n = pg->keep;
}

void page_sort(Kept *pg) {
    std::sort(pg->rows, pg->rows + pg->n, seq_before);
}

namespace {

void page_add(Kept *pg, int64 seq, HeapTuple tuple, int part, int32 range, char seen) {
    if (pg->n == pg->cap && pg->keep < pg->n) page_prune(pg);
    if (pg->n == pg->cap) {  // keep >= cap: grow
        pg->cap *= 2;
        pg->rows = (Row *)changefeed_read_buffer_grow(kPageRowsBuffer, pg->rows, sizeof(Row) * pg->cap);
    }
    pg->rows[pg->n++] = Row{seq, tuple, part, range, (Datum)0, seen, false};
}

// The log row in `slot` (of transaction `txid`, visible in the read's
// snapshot) onto the page, if it passes the read's filters: whether it went.
bool consider(const Window *w, Partition *p, int part, int32 range, TupleTableSlot *slot, Kept *pg) {
    bool isnull;
    FullTransactionId txid = DatumGetFullTransactionId(slot_getattr(slot, p->att[kTxid], &isnull));
    if (isnull || !pg_snapshot_visible(w->hi, txid)) return false;
    int64 seq = DatumGetInt64(slot_getattr(slot, p->att[kSeq], &isnull));
    if (isnull) return false;
    CHECK_FOR_INTERRUPTS();
    const char logged = DatumGetChar(slot_getattr(slot, p->att[kOp], &isnull));
    if (logged == 's' && !w->with_schema) return false;  // asked for by mode 'all_with_schema' alone
    if (w->latest) {                                     // coalesced once the whole window is in (latest_versions)
        page_add(pg, seq, ExecCopySlotHeapTuple(slot), part, range, 0);
        return true;
    }
    if (seq <= w->after || seq >= pg->bound) return false;
    const bool copy = logged == 'x';
    const bool moves = w->filter != NULL && w->filter->moves;
    if (copy && w->tenants.n < 0 && w->sight == NULL && !moves) return false;  // no one's sight or view to leave
    bool moved = false;
    char op = logged;
    if (copy || logged == 'r' || logged == 'm') {
        bool nul = true;
        if (copy)
            (void)(p->att[kPreviousTenant] != InvalidAttrNumber ? slot_getattr(slot, p->att[kPreviousTenant], &nul)
                                                                : (Datum)0);
        else if (p->att[kPreviousPartitionKey] != InvalidAttrNumber)
            (void)slot_getattr(slot, p->att[kPreviousPartitionKey], &nul);
        if (copy)
            op = logical_op(logged, nul);
        else
            moved = !nul;
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
            if (seen == 0) return false;
        }
        // A move out of a filter's view may come from the copy: judged below.
        if (w->sight == NULL && !moves && !side_kept(copy, moved, seen)) return false;
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
            if (!in_set(&w->doc_ids, d, nul)) return false;
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
            if (seen == 0 || (!moves && !side_kept(copy, moved, seen))) return false;
            if (w->filter != NULL) {
                // Tested on what the reader may see of the images.
                if (!current_null) current = reader_visible_image(w->sight, version, current);
                if (!previous_null) previous = reader_visible_image(w->sight, version, previous);
                seen = filter_seen(w->filter, seen, current, current_null, previous, previous_null);
                if (seen == 0 || !side_kept(copy, moved, seen)) return false;
            }
        }
    }
    // What the reader's sight or the filter made of it (a move), else the
    // output asks its tenants again.
    page_add(pg, seq, ExecCopySlotHeapTuple(slot), part, range, w->sight != NULL || w->filter != NULL ? seen : 0);
    return true;
}

// Every row of the lookup `keys` (mode 'latest', or an index without seq).
void scan_one(const Window *w, Partition *p, int part, int32 range, ScanKeyData *keys, int nkeys, TupleTableSlot *slot,
              Kept *pg) {
    IndexScanDesc scan = index_beginscan(p->heap, p->index, GetActiveSnapshot(), nkeys, 0);
    index_rescan(scan, keys, nkeys, NULL, 0);
    while (index_getnext_slot(scan, ForwardScanDirection, slot)) (void)consider(w, p, part, range, slot, pg);
    index_endscan(scan);
}

// With the index by (txid, seq), a transaction's rows come in seq order: of
// one, no more than the page's `keep` can be on the page, and none at or
// past its bound.  So a page inside a window of one large transaction reads
// that page's rows, not the window again from its start (after `after`:
// the index is entered there).
constexpr int kSkipsBeforeJump = 64;

// The rows of transaction `txid` after `after`, in seq order, up to what the page can take.
void scan_transaction(const Window *w, Partition *p, int part, int32 range, FullTransactionId txid,
                      TupleTableSlot *slot, Kept *pg) {
    if (!pg_snapshot_visible(w->hi, txid)) return;  // in progress still, as it was at lo
    ScanKeyData keys[5];
    const int nkeys = scan_keys(keys, w->collection, range, txid, InvalidFullTransactionId, w->after);
    IndexScanDesc scan = index_beginscan(p->heap, p->index, GetActiveSnapshot(), nkeys, 0);
    scan->xs_want_itup = true;
    index_rescan(scan, keys, nkeys, NULL, 0);
    int taken = 0;
    while (taken < pg->keep && index_getnext_tid(scan, ForwardScanDirection) != NULL) {
        bool isnull;
        const int64 seq = DatumGetInt64(index_getattr(scan->xs_itup, 4, scan->xs_itupdesc, &isnull));
        if (!isnull && seq >= pg->bound) break;
        if (!index_fetch_heap(scan, slot)) continue;  // not visible in our snapshot
        taken += consider(w, p, part, range, slot, pg);
    }
    index_endscan(scan);
}

// The transactions in [from, to), each as scan_transaction() reads it.  One
// scan, read from the index alone where it can: a row at or before `after`
// is passed over without its heap tuple, and after a run of them, or once
// the page can take no more of a transaction, the scan jumps to the rest of
// it (after `after`) or past it.
void scan_transactions(const Window *w, Partition *p, int part, int32 range, FullTransactionId from,
                       FullTransactionId to, TupleTableSlot *slot, Kept *pg) {
    while (FullTransactionIdPrecedes(from, to)) {
        ScanKeyData keys[5];
        const int nkeys = scan_keys(keys, w->collection, range, from, to);
        IndexScanDesc scan = index_beginscan(p->heap, p->index, GetActiveSnapshot(), nkeys, 0);
        scan->xs_want_itup = true;
        index_rescan(scan, keys, nkeys, NULL, 0);
        FullTransactionId current = InvalidFullTransactionId;
        bool done = false;  // the current transaction can give the page nothing (more)
        int skipped = 0, taken = 0;
        enum { kEnd, kPast, kRest } jump = kEnd;
        while (index_getnext_tid(scan, ForwardScanDirection) != NULL) {
            bool isnull;
            const FullTransactionId txid = DatumGetFullTransactionId(index_getattr(scan->xs_itup, 3, scan->xs_itupdesc,
                                                                                   &isnull));
            const int64 seq = DatumGetInt64(index_getattr(scan->xs_itup, 4, scan->xs_itupdesc, &isnull));
            if (!FullTransactionIdEquals(txid, current)) {
                current = txid;
                done = !pg_snapshot_visible(w->hi, txid);
                skipped = taken = 0;
            }
            // Passed over in the index; after a run of them, jumped over.
            if (!done && (seq >= pg->bound || taken >= pg->keep)) done = true;
            if (done || seq <= w->after) {
                if (++skipped < kSkipsBeforeJump) continue;
                jump = done ? kPast : kRest;
                break;
            }
            if (!index_fetch_heap(scan, slot)) continue;  // not visible in our snapshot
            taken += consider(w, p, part, range, slot, pg);
        }
        index_endscan(scan);
        CHECK_FOR_INTERRUPTS();
        if (jump == kEnd) return;
        if (jump == kRest) scan_transaction(w, p, part, range, current, slot, pg);
        FullTransactionIdAdvance(&current);
        from = current;
    }
}

}  // namespace

void scan_window(const Window *w, Partition *parts, int nparts, Kept *pg) {
    FullTransactionId lo_xmax = w->lo->xmax, hi_xmax = w->hi->xmax;
    ScanKeyData keys[4];
    for (int i = 0; i < nparts; i++) {
        Partition *p = &parts[i];
        TupleTableSlot *slot = table_slot_create(p->heap, NULL);
        const bool ordered = p->by_seq && !w->latest;
        for (int r = 0; r < w->nranges; r++) {
            const int32 range = w->ranges[r];
            if (ordered) {
                scan_transactions(w, p, i, range, lo_xmax, hi_xmax, slot, pg);
                for (uint32 x = 0; x < w->lo->nxip; x++) scan_transaction(w, p, i, range, w->lo->xip[x], slot, pg);
                continue;
            }
            if (FullTransactionIdPrecedes(lo_xmax, hi_xmax))
                scan_one(w, p, i, range, keys, scan_keys(keys, w->collection, range, lo_xmax, hi_xmax), slot, pg);
            for (uint32 x = 0; x < w->lo->nxip; x++)
                scan_one(w, p, i, range, keys,
                         scan_keys(keys, w->collection, range, w->lo->xip[x], InvalidFullTransactionId), slot, pg);
        }
        ExecDropSingleTupleTableSlot(slot);
    }
}

void refuse_own_changes() {
    if (changefeed_xact_captured())
        ereport(ERROR, (errcode(changefeed::kOwnChanges),
                        errmsg("cannot read the change feed in a transaction that captured changes itself"),
                        errdetail("Its own uncommitted changes would be delivered before they commit.")));
}

}  // namespace changefeed::read
