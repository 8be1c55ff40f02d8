// Where a read's windows start and end (window_plan.cpp).  In: a window's
// start and the statement's snapshot; read_ranges()'s arguments.  Out: how
// many index entries the window holds (up to a bound), the tick that ends a
// window when they are more than a page; read_ranges_plan()'s groups of
// ranges by position (read/read.sql checks the call), copied out of SPI.
#pragma once
#include "pg.hpp"
#include "position/pg_snapshot.hpp"
#include "read/log_partitions.hpp"

extern "C" {
#include "utils/array.h"
}

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

// read_ranges_plan() of read_ranges()'s first six arguments (fcinfo's).
RangesPlan plan_ranges(FunctionCallInfo fcinfo);

}  // namespace changefeed::read
