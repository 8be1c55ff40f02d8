// The plan of a read_ranges() call (ranges_plan.cpp).  In: read_ranges()'s
// first six arguments.  Out: the call checked (rights, ranges, positions,
// history), its collection and tenants, and its ranges grouped by position,
// oldest first, as changefeed.read_ranges_plan() (read/read.sql) defines
// them.
#pragma once
#include "pg.hpp"
#include "position/pg_snapshot.hpp"

extern "C" {
#include "utils/array.h"
}

namespace changefeed::read {

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

struct RangesPlan {
    int32 collection;    // 0 when no range was asked for
    ArrayType *tenants;  // null: every tenant
    RangeGroup *groups;
    int ngroups;
};

// The plan of read_ranges()'s first six arguments (fcinfo's), in the
// caller's memory.
RangesPlan plan_ranges(FunctionCallInfo fcinfo);

}  // namespace changefeed::read
