// A row's jsonb image built straight from the tuple: the same value as
// to_jsonb(row), written in jsonb's binary form without the generic
// categorize / push / sort / serialize round trip.  Used by capture for the
// current and previous images.
#pragma once
#include "pg.hpp"

struct RowImagePlan;

// The plan for rows of `desc`, allocated in `cxt`; NULL when a column's type
// is one the direct form does not cover (arrays, composites, json, types of
// extensions that may have a cast to json): the caller uses to_jsonb().
RowImagePlan *changefeed_row_image_plan(TupleDesc desc, MemoryContext cxt);

// The row's image (a jsonb Datum), or (Datum)0 when it does not fit the
// direct form (a value too large for one jsonb object): the caller uses
// to_jsonb(), which reports that case as it always has.
Datum changefeed_row_image(const RowImagePlan *plan, HeapTuple tuple, TupleDesc desc);
