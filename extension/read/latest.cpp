// The latest version of each document of a window (latest.hpp).
#include "pg.hpp"
#include "access/reader_sight.hpp"
#include "capture/previous_patch.hpp"
#include "read/current_rows.hpp"
#include "read/latest.hpp"
#include "read/window_filter.hpp"

extern "C" {
#include "utils/rel.h"
}

namespace changefeed::read {

namespace {

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

}  // namespace

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
            if (w->filter != NULL && filter_seen(w->filter, seen, current, current_null, previous, previous_null) == 0)
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
            if (!current_row(w->current, DatumGetTextPP(doc), &document, &tenant)) continue;      // gone
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

}  // namespace changefeed::read
