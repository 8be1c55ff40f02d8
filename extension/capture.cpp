// Capture: the row trigger (create / replace / delete) and the TRUNCATE
// statement trigger (clear).  This is the product's hottest path: per row it
// formats the key, converts the row(s) to jsonb and hands one log row to
// log_writer.cpp.  It never sends NOTIFY itself when preloaded.
//
// Only plain C data lives in these frames (ereport may longjmp through them).
#include "pg.hpp"
#include "log_writer.hpp"

extern "C" {
#include "nodes/makefuncs.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/rel.h"
}

namespace {

constexpr int kMaxKeys = INDEX_MAX_KEYS;

// Trigger arguments, parsed once per statement and kept in fn_extra.
struct CaptureState {
    Oid trigger_oid;
    int32 collection_id;
    int32 ranges;
    bool keep_previous;
    int nkeys;
    AttrNumber keys[kMaxKeys];
    int nparts;
    AttrNumber parts[kMaxKeys];
    AttrNumber tenant;
    FmgrInfo key_out[kMaxKeys];
    FmgrInfo part_out[kMaxKeys];
    FmgrInfo tenant_out;
    FmgrInfo to_jsonb;
};

int parse_attnums(const char *list, AttrNumber *out, const char *what) {
    int n = 0;
    const char *p = list;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v <= 0 || v > MaxAttrNumber || n >= kMaxKeys)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                            errmsg("changefeed trigger has a bad %s list \"%s\"", what, list),
                            errhint("Disable and enable the table again.")));
        out[n++] = (AttrNumber)v;
        p = *end == ',' ? end + 1 : end;
    }
    if (n == 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("changefeed trigger has an empty %s list", what)));
    return n;
}

int32 parse_int(const char *s) {
    return pg_strtoint32(s);
}

void lookup_output(TupleDesc desc, AttrNumber attnum, FmgrInfo *finfo, MemoryContext cxt) {
    Oid func;
    bool varlena;
    getTypeOutputInfo(TupleDescAttr(desc, attnum - 1)->atttypid, &func, &varlena);
    fmgr_info_cxt(func, finfo, cxt);
}

CaptureState *capture_state(FunctionCallInfo fcinfo, TriggerData *trig) {
    CaptureState *st = (CaptureState *)fcinfo->flinfo->fn_extra;
    Trigger *t = trig->tg_trigger;
    if (st != NULL && st->trigger_oid == t->tgoid) return st;

    if (t->tgnargs != 6)
        ereport(ERROR, (errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
                        errmsg("changefeed.capture_row() expects 6 trigger arguments, got %d", t->tgnargs),
                        errhint("Install it with changefeed.enable().")));
    MemoryContext cxt = fcinfo->flinfo->fn_mcxt;
    TupleDesc desc = RelationGetDescr(trig->tg_relation);
    st = (CaptureState *)MemoryContextAllocZero(cxt, sizeof(CaptureState));
    st->trigger_oid = t->tgoid;
    st->collection_id = parse_int(t->tgargs[0]);
    st->ranges = parse_int(t->tgargs[1]);
    st->keep_previous = t->tgargs[2][0] == 't';
    st->nkeys = parse_attnums(t->tgargs[3], st->keys, "key");
    st->nparts = parse_attnums(t->tgargs[4], st->parts, "partition key");
    st->tenant = (AttrNumber)parse_int(t->tgargs[5]);
    if (st->ranges < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("changefeed trigger has no ranges")));
    for (int i = 0; i < st->nkeys; i++) {
        if (st->keys[i] > desc->natts) elog(ERROR, "changefeed key column %d is gone", st->keys[i]);
        lookup_output(desc, st->keys[i], &st->key_out[i], cxt);
    }
    for (int i = 0; i < st->nparts; i++) {
        if (st->parts[i] > desc->natts) elog(ERROR, "changefeed partition key column %d is gone", st->parts[i]);
        lookup_output(desc, st->parts[i], &st->part_out[i], cxt);
    }
    if (st->tenant > 0) {
        if (st->tenant > desc->natts) elog(ERROR, "changefeed tenant column %d is gone", st->tenant);
        lookup_output(desc, st->tenant, &st->tenant_out, cxt);
    }
    // to_jsonb() reads its argument type from the call expression, so give it one.
    fmgr_info_cxt(F_TO_JSONB, &st->to_jsonb, cxt);
    MemoryContext old = MemoryContextSwitchTo(cxt);
    Node *expr = (Node *)makeFuncExpr(F_TO_JSONB, JSONBOID,
                                      list_make1(makeNullConst(desc->tdtypeid, -1, InvalidOid)),
                                      InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
    MemoryContextSwitchTo(old);
    fmgr_info_set_expr(expr, &st->to_jsonb);
    fcinfo->flinfo->fn_extra = st;
    return st;
}

// Text of one column, or NULL.
char *column_text(HeapTuple tuple, TupleDesc desc, AttrNumber attnum, FmgrInfo *out) {
    bool isnull;
    Datum v = heap_getattr(tuple, attnum, desc, &isnull);
    return isnull ? NULL : OutputFunctionCall(out, v);
}

// Document id: the key's text, or a JSON array of the texts for a composite key.
char *document_id(CaptureState *st, HeapTuple tuple, TupleDesc desc) {
    if (st->nkeys == 1) {
        char *s = column_text(tuple, desc, st->keys[0], &st->key_out[0]);
        return s ? s : pstrdup("");
    }
    StringInfoData buf;
    initStringInfo(&buf);
    appendStringInfoChar(&buf, '[');
    for (int i = 0; i < st->nkeys; i++) {
        char *s = column_text(tuple, desc, st->keys[i], &st->key_out[i]);
        if (i) appendStringInfoChar(&buf, ',');
        if (s)
            escape_json(&buf, s);
        else
            appendStringInfoString(&buf, "null");
    }
    appendStringInfoChar(&buf, ']');
    return buf.data;
}

// Partition key: the column's text, or the texts joined by '/' (null as empty).
char *partition_key(CaptureState *st, HeapTuple tuple, TupleDesc desc) {
    if (st->nparts == 1) {
        char *s = column_text(tuple, desc, st->parts[0], &st->part_out[0]);
        return s ? s : pstrdup("");
    }
    StringInfoData buf;
    initStringInfo(&buf);
    for (int i = 0; i < st->nparts; i++) {
        char *s = column_text(tuple, desc, st->parts[i], &st->part_out[i]);
        if (i) appendStringInfoChar(&buf, '/');
        if (s) appendStringInfoString(&buf, s);
    }
    return buf.data;
}

Datum row_jsonb(CaptureState *st, HeapTuple tuple, TupleDesc desc) {
    return FunctionCall1(&st->to_jsonb, heap_copy_tuple_as_datum(tuple, desc));
}

bool key_changed(CaptureState *st, HeapTuple older, HeapTuple newer, TupleDesc desc) {
    for (int i = 0; i < st->nkeys; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, st->keys[i] - 1);
        bool null_old, null_new;
        Datum a = heap_getattr(older, st->keys[i], desc, &null_old);
        Datum b = heap_getattr(newer, st->keys[i], desc, &null_new);
        if (null_old != null_new) return true;
        if (!null_old && !datumIsEqual(a, b, att->attbyval, att->attlen)) return true;
    }
    return false;
}

// Writes one row of changefeed.log in the writer's transaction.
void log_change(CaptureState *st, TupleDesc desc, char op, HeapTuple newer, HeapTuple older) {
    HeapTuple image = newer ? newer : older;
    char *doc = document_id(st, image, desc);
    char *part = partition_key(st, image, desc);
    int32 range = (int32)(changefeed_range_hash(part, strlen(part)) % (uint32)st->ranges);
    char *tenant = st->tenant > 0 ? column_text(image, desc, st->tenant, &st->tenant_out) : NULL;
    bool ttl = op == 'd' && changefeed_ttl_sweep_active(st->collection_id);

    LogRow row;
    row.collection_id = st->collection_id;
    row.range_id = range;
    row.doc_id = CStringGetTextDatum(doc);
    row.partition_key = CStringGetTextDatum(part);
    row.op = op;
    row.current = newer ? row_jsonb(st, newer, desc) : (Datum)0;
    row.previous = older && st->keep_previous ? row_jsonb(st, older, desc) : (Datum)0;
    row.ttl_expired = ttl;
    row.tenant = tenant ? CStringGetTextDatum(tenant) : (Datum)0;
    changefeed_log_write(&row);
}

void check_trigger(FunctionCallInfo fcinfo, const char *name) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("%s must be called as a trigger", name)));
    TriggerData *trig = (TriggerData *)fcinfo->context;
    if (!TRIGGER_FIRED_AFTER(trig->tg_event))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("%s must be an AFTER trigger", name)));
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(changefeed_capture_row);
PG_FUNCTION_INFO_V1(changefeed_capture_truncate);

Datum changefeed_capture_row(PG_FUNCTION_ARGS) {
    check_trigger(fcinfo, "changefeed.capture_row()");
    TriggerData *trig = (TriggerData *)fcinfo->context;
    if (!TRIGGER_FIRED_FOR_ROW(trig->tg_event))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.capture_row() must be a FOR EACH ROW trigger")));
    CaptureState *st = capture_state(fcinfo, trig);
    TupleDesc desc = RelationGetDescr(trig->tg_relation);

    HeapTuple newer = NULL, older = NULL;
    char op;
    if (TRIGGER_FIRED_BY_INSERT(trig->tg_event)) {
        op = 'c';
        newer = trig->tg_trigtuple;
    } else if (TRIGGER_FIRED_BY_UPDATE(trig->tg_event)) {
        op = 'r';
        older = trig->tg_trigtuple;
        newer = trig->tg_newtuple;
    } else if (TRIGGER_FIRED_BY_DELETE(trig->tg_event)) {
        op = 'd';
        older = trig->tg_trigtuple;
    } else {
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.capture_row() fired by an unexpected event")));
    }
    if (op == 'r' && key_changed(st, older, newer, desc)) {
        // A new primary key is a new document: the old one is deleted.
        log_change(st, desc, 'd', NULL, older);
        log_change(st, desc, 'c', newer, NULL);
    } else {
        log_change(st, desc, op, newer, older);
    }
    changefeed_note_capture(st->collection_id);
    return PointerGetDatum(NULL);
}

// TRUNCATE: one 'clear' row per range, so every range's consumer sees it.
Datum changefeed_capture_truncate(PG_FUNCTION_ARGS) {
    check_trigger(fcinfo, "changefeed.capture_truncate()");
    TriggerData *trig = (TriggerData *)fcinfo->context;
    if (!TRIGGER_FIRED_BY_TRUNCATE(trig->tg_event))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.capture_truncate() must be an AFTER TRUNCATE trigger")));
    Trigger *t = trig->tg_trigger;
    if (t->tgnargs != 2)
        ereport(ERROR, (errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
                        errmsg("changefeed.capture_truncate() expects 2 trigger arguments, got %d", t->tgnargs)));
    int32 collection_id = parse_int(t->tgargs[0]);
    int32 ranges = parse_int(t->tgargs[1]);

    for (int32 range = 0; range < ranges; range++) {
        LogRow row = {};
        row.collection_id = collection_id;
        row.range_id = range;
        row.op = 't';
        changefeed_log_write(&row);
    }

    changefeed_note_capture(collection_id);
    return PointerGetDatum(NULL);
}

}  // extern "C"
