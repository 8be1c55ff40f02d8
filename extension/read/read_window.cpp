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
// The pieces, in the order a page goes through them: ranges_plan.hpp
// (read_ranges()'s checks and groups), window_plan.hpp (where a window ends), window_scan.hpp (the window's rows,
// filtered by window_filter.hpp), latest.hpp (mode 'latest'), output.hpp
// (the result's rows and their positions); long_poll.hpp (read_ranges()'s
// wait); log_partitions.hpp opens the log for them.  Here: the pages, the
// window loop and the SQL entry points.
#include "pg.hpp"
#include "access/reader_sight.hpp"
#include "position/pg_snapshot.hpp"
#include "position/position.hpp"
#include "position/position_codec.hpp"
#include "position/position_history.hpp"
#include "position/position_key.hpp"
#include "read/current_rows.hpp"
#include "read/latest.hpp"
#include "read/log_partitions.hpp"
#include "read/long_poll.hpp"
#include "read/output.hpp"
#include "read/ranges_plan.hpp"
#include "read/read_memory.hpp"
#include "read/window_filter.hpp"
#include "read/window_plan.hpp"
#include "read/window_scan.hpp"
#include "settings.hpp"
#include "wake/notifier.hpp"

extern "C" {
#include "access/xlog.h"
#include "utils/array.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(changefeed_read_windows);
PG_FUNCTION_INFO_V1(changefeed_read_ranges);
}

using namespace changefeed::read;

namespace {

PgSnapshot *snapshot_arg(FunctionCallInfo fcinfo, int n) {
    return (PgSnapshot *)PG_DETOAST_DATUM(PG_GETARG_DATUM(n));
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
                                                            changefeed_position_key(), positions, stride, &length, err,
                                                            sizeof err);
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
            if (count_window(w->collection, w->ranges, w->nranges, w->lo, now, parts, nparts, remaining + 1) >
                remaining)
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

}  // namespace

extern "C" {

// read_windows(collection_id int, ranges int[], lo pg_snapshot, hi pg_snapshot,
//              after bigint, max_changes int, doc_ids text[], tenants text[],
//              latest bool, filter jsonpath, filter_vars jsonb,
//              as_caller bool, with_schema bool, filter_moves bool) -> read()'s rows
// read() from the position (lo, hi, after) (hi null: between windows): at
// most max_changes rows, window after window, in seq order; with doc_ids or
// tenants (null: all), only changes of those documents or tenants, and
// clears (mode 'all'); with `filter` (null: none), only changes that pass it
// (filter_seen(), vars from filter_vars, null: none; with filter_moves, a
// replace that enters or leaves the filter's view as a create or a delete); `latest`: per window
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
    w.filter = filter_of(fcinfo, 9, 10, 13);
    if (w.filter != NULL && w.latest) w.filter->moves = false;  // the latest version alone is tested
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
