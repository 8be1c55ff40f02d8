// Where a read's windows start and end (window_plan.cpp).  In: a window's
// start and the statement's snapshot.  Out: how
// many index entries the window holds (up to a bound), the tick that ends a
// window when they are more than a page.
#pragma once
#include "pg.hpp"
#include "position/pg_snapshot.hpp"
#include "read/log_partitions.hpp"

namespace changefeed::read {

// Index entries of the window (lo, upto], counted up to stop_at, from the
// index alone: rows of aborted transactions count too, so this is an upper
// bound, good only to choose a window's shape.
int32 count_window(int32 collection, const int32 *ranges, int nranges, const PgSnapshot *lo, const PgSnapshot *upto,
                   Partition *parts, int nparts, int32 stop_at);

// The tick `offset` ticks after lo (a larger xmax: it sees all lo sees) and
// at or before `upto`; the last one there when there are fewer; NULL when
// there is none.
const PgSnapshot *tick_after(const PgSnapshot *lo, const PgSnapshot *upto, int32 offset);

}  // namespace changefeed::read
