// Mode 'latest' of a read (latest.cpp).  In: every row of a window, as the
// scans kept them (window_scan.hpp), unfiltered.  Out: the rows of the page,
// per document its last version that passes the read's filters, some read
// from the table now (current_rows.hpp); the others freed.
#pragma once
#include "pg.hpp"
#include "read/log_partitions.hpp"
#include "read/window_scan.hpp"

namespace changefeed::read {

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
void latest_versions(const Window *w, Partition *parts, Kept *pg, int keep);

}  // namespace changefeed::read
