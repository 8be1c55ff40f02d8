// The filters of a read's rows (window_filter.hpp).
#include "pg.hpp"
#include "read/window_filter.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "utils/fmgroids.h"
#include "utils/rel.h"
}

namespace changefeed::read {

TextSet text_set_of(ArrayType *arr) {
    TextSet set = {NULL, -1};
    if (arr == NULL) return set;
    Datum *elems;
    bool *nulls;
    deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &set.n);
    set.items = (text **)palloc(sizeof(text *) * Max(set.n, 1));
    int k = 0;
    for (int i = 0; i < set.n; i++)
        if (!nulls[i]) set.items[k++] = DatumGetTextPP(elems[i]);
    set.n = k;
    return set;
}

TextSet text_set(FunctionCallInfo fcinfo, int arg) {
    return text_set_of(PG_ARGISNULL(arg) ? NULL : PG_GETARG_ARRAYTYPE_P(arg));
}

bool in_set(const TextSet *set, Datum value, bool isnull) {
    if (isnull) return false;
    text *t = DatumGetTextPP(value);
    size_t len = VARSIZE_ANY_EXHDR(t);
    for (int i = 0; i < set->n; i++)
        if (VARSIZE_ANY_EXHDR(set->items[i]) == len && memcmp(VARDATA_ANY(set->items[i]), VARDATA_ANY(t), len) == 0)
            return true;
    return false;
}

char seen_op(const TextSet *tenants, char op, Datum tenant, bool tenant_null, Datum previous_tenant,
             bool previous_null) {
    if (tenants->n < 0) return op == 'm' ? 'r' : op;
    if (op == 't' || op == 's') return op;
    bool now_in = in_set(tenants, tenant, tenant_null);
    if (op != 'm') return now_in ? op : 0;
    bool was_in = in_set(tenants, previous_tenant, previous_null);
    return now_in ? (was_in ? 'r' : 'c') : (was_in ? 'd' : 0);
}

Filter *filter_of(FunctionCallInfo fcinfo, int path_arg, int vars_arg, int moves_arg) {
    if (PG_ARGISNULL(path_arg)) return NULL;
    Filter *f = (Filter *)palloc0(sizeof(Filter));
    f->moves = moves_arg < PG_NARGS() && !PG_ARGISNULL(moves_arg) && PG_GETARG_BOOL(moves_arg);
    fmgr_info(F_JSONB_PATH_MATCH, &f->match);
    f->path = PointerGetDatum(PG_DETOAST_DATUM(PG_GETARG_DATUM(path_arg)));  // unpacked once, not per row
    f->vars = PG_ARGISNULL(vars_arg) ? DirectFunctionCall1(jsonb_in, CStringGetDatum("{}"))
                                     : PointerGetDatum(PG_DETOAST_DATUM(PG_GETARG_DATUM(vars_arg)));
    f->scratch = AllocSetContextCreate(CurrentMemoryContext, "changefeed read filter", ALLOCSET_SMALL_SIZES);
    return f;
}

bool path_matches(Filter *f, Datum document) {
    MemoryContext caller = MemoryContextSwitchTo(f->scratch);
    LOCAL_FCINFO(call, 4);
    InitFunctionCallInfoData(*call, &f->match, 4, InvalidOid, NULL, NULL);
    call->args[0].value = document, call->args[0].isnull = false;
    call->args[1].value = f->path, call->args[1].isnull = false;
    call->args[2].value = f->vars, call->args[2].isnull = false;
    call->args[3].value = BoolGetDatum(true), call->args[3].isnull = false;
    Datum result = FunctionCallInvoke(call);
    bool matches = !call->isnull && DatumGetBool(result);
    MemoryContextSwitchTo(caller);
    MemoryContextReset(f->scratch);
    return matches;
}

char filter_seen(Filter *f, char seen, Datum current, bool current_null, Datum previous, bool previous_null) {
    if (f == NULL || seen == 't' || seen == 's') return seen;
    if (seen == 'd') return previous_null || path_matches(f, previous) ? seen : 0;
    const bool now_in = !current_null && path_matches(f, current);
    if (seen != 'r' || !f->moves || previous_null) return now_in ? seen : 0;
    // A replace, judged on both images: it enters the view, leaves it or stays.
    const bool was_in = path_matches(f, previous);
    return now_in ? (was_in ? 'r' : 'c') : (was_in ? 'd' : 0);
}

int32 version_of(ReaderSight *sight, bool isnull, Datum logged, int64 seq) {
    return isnull ? reader_version_at(sight, seq) : DatumGetInt32(logged);
}

int32 version_in_slot(ReaderSight *sight, Partition *p, TupleTableSlot *slot, int64 seq) {
    bool isnull = true;
    Datum v = p->att[kSchemaVersion] == InvalidAttrNumber ? (Datum)0
                                                          : slot_getattr(slot, p->att[kSchemaVersion], &isnull);
    return version_of(sight, isnull, v, seq);
}

int32 version_in_tuple(ReaderSight *sight, Partition *p, HeapTuple tuple, int64 seq) {
    bool isnull = true;
    Datum v = p->att[kSchemaVersion] == InvalidAttrNumber
                  ? (Datum)0
                  : heap_getattr(tuple, p->att[kSchemaVersion], RelationGetDescr(p->heap), &isnull);
    return version_of(sight, isnull, v, seq);
}

void refuse_no_images(Partition *p, char op, bool current_null, const Datum *doc_id, int64 seq) {
    if (!current_null || (op != 'c' && op != 'r' && op != 'm')) return;
    ereport(ERROR, (errcode(changefeed::kNoImages),
                    doc_id != NULL ? errmsg("a change of document %s was logged without images (images => 'keys')",
                                            TextDatumGetCString(*doc_id))
                                   : errmsg("a change was logged without images (images => 'keys')"),
                    errdetail("The all-versions feed cannot deliver it: change %lld in partition \"%s\" of the "
                              "change log holds its key alone.",
                              (long long)seq, RelationGetRelationName(p->heap)),
                    errhint("Read past it in mode 'latest', or resume from a position taken after "
                            "changefeed.alter(tbl, images => 'full').")));
}

}  // namespace changefeed::read
