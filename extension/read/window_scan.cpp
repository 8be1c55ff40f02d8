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

void scan_one(const Window *w, Partition *p, int part, int32 range, ScanKeyData *keys, int nkeys, TupleTableSlot *slot,
              Kept *pg) {
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
        if (w->latest) {                                 // coalesced once the whole window is in (latest_versions)
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

}  // namespace

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

void refuse_own_changes() {
    if (changefeed_xact_captured())
        ereport(ERROR, (errcode(changefeed::kOwnChanges),
                        errmsg("cannot read the change feed in a transaction that captured changes itself"),
                        errdetail("Its own uncommitted changes would be delivered before they commit.")));
}

}  // namespace changefeed::read
