// What a read lets through of the log's rows (window_filter.cpp).  In: a log
// row (its op, tenants, document id, images and schema version), what the
// read asked for (doc_ids, tenants, a jsonpath filter) and what the reader
// may see (reader_sight.hpp).  Out: whether the row passes, and the
// operation the reader sees of it (c, r, d, t or s; 0: none); or the error
// for a change logged without the images the read needs.
#pragma once
#include "pg.hpp"
#include "access/reader_sight.hpp"
#include "read/log_partitions.hpp"

extern "C" {
#include "executor/tuptable.h"
#include "utils/array.h"
}

namespace changefeed::read {

// A set of texts (doc_ids, tenants): null when the read does not filter.
struct TextSet {
    text **items;
    int n;
};

// The array's texts (nulls left out); no filter (n < 0) for a null array.
TextSet text_set_of(ArrayType *arr);
// text_set_of() of argument `arg` of the call.
TextSet text_set(FunctionCallInfo fcinfo, int arg);

// `value = ANY (set)`: false for a null value, as in SQL.
bool in_set(const TextSet *set, Datum value, bool isnull);

// The operation a read scoped to `tenants` sees of a change (0: none, the
// change is not the tenants'): a row that moved from one tenant to another
// (op 'm') is a replace for a read of both or of all, a create (without its
// image from before) for the tenant it went to and a delete (without its
// image after) for the one it left: no tenant sees another's row.  Clears
// pass.
char seen_op(const TextSet *tenants, char op, Datum tenant, bool tenant_null, Datum previous_tenant,
             bool previous_null);

// A read's jsonpath filter, evaluated by PostgreSQL's own
// jsonb_path_match(document, filter, vars, silent => true), the function a
// filter in SQL would call: a result that is not true (false, null, not a
// boolean, an error the silent mode suppresses) is no match.  Errors silent
// mode does not suppress (vars not an object, a variable missing from vars)
// end the read.  Each evaluation's memory is freed with `scratch`.
struct Filter {
    FmgrInfo match;  // jsonb_path_match(jsonb, jsonpath, jsonb, bool)
    Datum path;
    Datum vars;
    MemoryContext scratch;
    bool moves;  // a replace is judged on both images (filter_seen())
};

// The filter of arguments `path_arg` (jsonpath), `vars_arg` (jsonb; null: no
// vars) and `moves_arg` (bool; null or past the call's arguments: false) of
// the call; NULL when the path is null.
Filter *filter_of(FunctionCallInfo fcinfo, int path_arg, int vars_arg, int moves_arg);
// Whether `document` matches the filter.
bool path_matches(Filter *f, Datum document);

// What the reader gets of a change it sees as `seen` (seen_op(),
// reader_sight_op()) through the filter: `seen`, or 0 when it does not pass.
// Creates and replaces are tested on the document after the write, deletes
// (a tenant's side of a move away included) on the one before it when the
// collection keeps previous images (passed through otherwise), clears always
// pass, and so do schema changes.  With `moves`, a replace with its image
// before is tested on both, as a view defined by the filter sees it: one that
// enters the view becomes 'c' (the document after), one that leaves it 'd'
// (the document before), one that stays 'r'.  No filter: `seen`.
char filter_seen(Filter *f, char seen, Datum current, bool current_null, Datum previous, bool previous_null);

// The schema version the row's images were written under; one logged
// without it is placed by its seq (reader_version_at()).
int32 version_of(ReaderSight *sight, bool isnull, Datum logged, int64 seq);

// version_of() of a log row of partition `p`, in a slot or a tuple.
int32 version_in_slot(ReaderSight *sight, Partition *p, TupleTableSlot *slot, int64 seq);
int32 version_in_tuple(ReaderSight *sight, Partition *p, HeapTuple tuple, int64 seq);

// A change logged without images (images => 'keys') cannot be one version of
// the all-versions feed: refused, as read() refuses the collection while it
// logs keys alone, never skipped.  (A create or replace has its image
// otherwise.)
// A reader whose sight is limited (`doc_id` null) is not told which
// document: it may be one its policies hide.
void refuse_no_images(Partition *p, char op, bool current_null, const Datum *doc_id, int64 seq);

// Inline, these three: the scans ask them of every row.

// A change of every document of its range (a clear or a schema change):
// document and tenant filters pass it.
inline bool of_every_document(char op) {
    return op == 't' || op == 's';
}

// A replace that changed the partition key is logged twice: where the row
// is now (op r or m, with previous_partition_key) and, as op 'x', in the
// range and under the key it had before (capture.cpp).  Both are judged as
// the replace (logical_op()); a reader whose sight the row left (its tenant,
// its policies) gets the delete from the 'x' copy, in the order of the range
// the document was in, and the other sides from the first; everyone else
// skips the copy.
inline char logical_op(char logged, bool previous_tenant_null) {
    return logged == 'x' ? (previous_tenant_null ? 'r' : 'm') : logged;
}

inline bool side_kept(bool copy, bool moved, char seen) {
    return copy ? seen == 'd' : !(moved && seen == 'd');
}

}  // namespace changefeed::read
