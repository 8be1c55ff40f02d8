// The scans of one window of a read (window_scan.cpp).  In: a Window, what
// committed between two snapshots lo and hi of some ranges of a collection,
// with what the read asks of it, and the log's partitions.  Out: the page in
// the making (Kept): the rows after `after` visible in hi that pass the
// read's filters (window_filter.hpp), the smallest seqs, copied out of the
// log; every row of the window in mode 'latest', which latest.hpp coalesces.
//
// "Not visible in lo" is "txid >= xmax(lo) or txid in xip(lo)": a range scan
// from xmax(lo) and one lookup per xid of xip(lo), so an old open
// transaction costs a lookup, not a rescan of everything since it began.
#pragma once
#include "pg.hpp"
#include "access/reader_sight.hpp"
#include "position/pg_snapshot.hpp"
#include "read/current_rows.hpp"
#include "read/log_partitions.hpp"
#include "read/window_filter.hpp"

namespace changefeed::read {

// The order of int32s for qsort() and bsearch(): a window's ranges are
// sorted by it, without duplicates.
int by_int32(const void *a, const void *b);

// One window of a read, and what the read asks of it.
struct Window {
    int32 collection;
    int32 *ranges;
    int nranges;
    const PgSnapshot *lo;
    const PgSnapshot *hi;
    int64 after;
    TextSet doc_ids;  // n < 0: no filter; clears always pass
    TextSet tenants;
    bool latest;     // mode 'latest': per document the window's last version
    Filter *filter;  // null: none
    // Mode 'latest': the collection's current rows, for the changes logged
    // without images (every change of a collection that logs keys alone).
    CurrentRows *current;
    // What the reader may see of the table's rows (null: all of them).
    ReaderSight *sight;
    // Mode 'all_with_schema': schema changes (op 's') are read too.
    bool with_schema;
};

// A log row on the page, with what the read made of it.
struct Row {
    int64 seq;
    HeapTuple tuple;
    int part;
    int32 range;
    Datum current;  // jsonb: the document read from the table (current_rows.hpp); 0: the logged one
    char seen;      // what the reader sees of it (reader_sight_op()); 0: what its tenants see (seen_op())
    bool carries;   // it carries its position (read_page())
};

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

// Keeps the `keep` smallest seqs (in no order).
void page_prune(Kept *pg);

// The page's rows in seq order.
void page_sort(Kept *pg);

// Every row of the window after `after`, in `pg` (the smallest seqs).
void scan_window(const Window *w, Partition *parts, int nparts, Kept *pg);

// As read() (read/read.sql): our own rows would be visible to our scans.
void refuse_own_changes();

}  // namespace changefeed::read
