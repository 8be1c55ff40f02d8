// Capture: the row trigger (create / replace / delete) and the TRUNCATE
// statement trigger (clear).  This is the product's hottest path: per row it
// formats the key in canonical text (identity.hpp), converts the row(s) to jsonb and hands one log row to
// log_writer.cpp.  It never sends NOTIFY itself when preloaded.
#include "pg.hpp"
#include "capture/identity.hpp"
#include "capture/previous_patch.hpp"
#include "capture/range_hash.hpp"
#include "capture/row_image.hpp"
#include "capture/schema_versions.hpp"
#include "capture/xact_tracking.hpp"
#include "guard/guard.hpp"
#include "log/log_writer.hpp"
#include "maintenance/ttl.hpp"
#include "settings.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "catalog/partition.h"
#include "nodes/makefuncs.h"
#include "replication/worker_internal.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
}

namespace {

constexpr int kMaxKeys = INDEX_MAX_KEYS;

// Trigger arguments, resolved once per statement and relation and kept in
// fn_extra.  Columns are named in the arguments and resolved here in the
// descriptor of the relation the trigger fires on: a partition's clone of the
// trigger carries the parent's arguments, and its columns may sit at other
// attribute numbers.
struct CaptureState {
    Oid trigger_oid;
    Oid relid;
    int32 collection_id;
    int32 ranges;
    bool keep_previous;
    bool keys_only;  // images => 'keys': no image at all, the reader reads the table
    bool replicated;
    int32 schema_version;  // of the table's shape now (schema_versions.cpp)
    int nkeys;
    AttrNumber keys[kMaxKeys];
    int nparts;
    AttrNumber parts[kMaxKeys];
    bool part_is_key;  // one column, the key's: the partition key's text is the document id
    AttrNumber tenant;
    FmgrInfo key_out[kMaxKeys];
    FmgrInfo part_out[kMaxKeys];
    FmgrInfo tenant_out;
    FmgrInfo to_jsonb;
    RowImagePlan *image;  // NULL: to_jsonb() builds the images
};

char *relation_name(Relation rel) {
    return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)), RelationGetRelationName(rel));
}

void bad_arguments(const char *detail) {
    ereport(ERROR, (errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
                    errmsg("changefeed.capture_row() has bad trigger arguments"), errdetail("%s", detail),
                    errhint("Install it with changefeed.enable(); changefeed.verify() shows what is wrong.")));
}

// Attribute number of column `name` in `desc`; a missing column refuses the
// write, since it cannot be captured.
AttrNumber resolve_column(Relation rel, const char *name, const char *what) {
    TupleDesc desc = RelationGetDescr(rel);
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0) return att->attnum;
    }
    ereport(ERROR,
            (errcode(changefeed::kWriteRefused),
             errmsg("table %s has no %s column \"%s\": the write cannot be captured", relation_name(rel), what, name),
             errhint("Run SELECT * FROM changefeed.verify(); to see what changed, then restore the "
                     "column or disable capture with changefeed.disable().")));
    return InvalidAttrNumber;
}

// A capture trigger fires on its collection's table or a partition of it.
// Any role may hold a clone of capture_row() (a partition made or attached by
// its owner gets one with the owner's rights), so a trigger a role made on a
// table of its own, naming another collection, must not file changes under
// it.  The DDL guard refuses such a trigger when it is made; this holds
// whenever the catalog can be read without waiting.
void check_collection_table(int32 collection_id, Relation rel, const char *function) {
    bool known;
    Oid table = changefeed_collection_table(collection_id, &known);
    if (!known) return;
    Oid relid = RelationGetRelid(rel);
    if (OidIsValid(table) &&
        (table == relid || (rel->rd_rel->relispartition && list_member_oid(get_partition_ancestors(relid), table))))
        return;
    ereport(ERROR,
            (errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
             errmsg("%s on %s is not a capture trigger of collection %d", function, relation_name(rel), collection_id),
             errdetail("Collection %d captures another table.", collection_id),
             errhint("Capture triggers are made by changefeed.enable(); changefeed.verify() shows what "
                     "is wrong.")));
}

int32 count_argument(Trigger *t, int at, int *next) {
    if (at >= t->tgnargs) bad_arguments("An argument count is missing.");
    int32 n = pg_strtoint32(t->tgargs[at]);
    if (n < 0 || n > kMaxKeys || at + 1 + n > t->tgnargs) bad_arguments("A column count is out of range.");
    *next = at + 1;
    return n;
}

void lookup_output(TupleDesc desc, AttrNumber attnum, FmgrInfo *finfo, MemoryContext cxt) {
    Oid func;
    bool varlena;
    getTypeOutputInfo(TupleDescAttr(desc, attnum - 1)->atttypid, &func, &varlena);
    fmgr_info_cxt(func, finfo, cxt);
}

// Arguments: collection id, ranges, previous images (t keep, f do not, k keys
// alone: no images at all), replicated (t/f),
// number of key columns, their names, number of partition-key columns, their
// names, tenant column name or ''.
CaptureState *capture_state(FunctionCallInfo fcinfo, TriggerData *trig) {
    CaptureState *st = (CaptureState *)fcinfo->flinfo->fn_extra;
    Trigger *t = trig->tg_trigger;
    Relation rel = trig->tg_relation;
    if (st != NULL && st->trigger_oid == t->tgoid && st->relid == RelationGetRelid(rel)) return st;

    if (t->tgnargs < 9) bad_arguments("Expected at least 9 arguments.");
    MemoryContext cxt = fcinfo->flinfo->fn_mcxt;
    TupleDesc desc = RelationGetDescr(rel);
    if (changefeed_has_virtual_generated_columns(desc))
        ereport(ERROR,
                (errcode(changefeed::kWriteRefused),
                 errmsg("table %s has a virtual generated column: the write cannot be captured", relation_name(rel)),
                 errdetail("A row trigger sees virtual generated columns as null."),
                 errhint("Make the column STORED, or disable capture with changefeed.disable().")));
    st = (CaptureState *)MemoryContextAllocZero(cxt, sizeof(CaptureState));
    st->trigger_oid = t->tgoid;
    st->relid = RelationGetRelid(rel);
    st->collection_id = pg_strtoint32(t->tgargs[0]);
    st->ranges = pg_strtoint32(t->tgargs[1]);
    st->keep_previous = t->tgargs[2][0] == 't';
    st->keys_only = t->tgargs[2][0] == 'k';
    st->replicated = t->tgargs[3][0] == 't';
    if (st->ranges < 1) bad_arguments("The number of ranges must be positive.");
    check_collection_table(st->collection_id, rel, "changefeed.capture_row()");
    st->schema_version = changefeed_schema_version(st->collection_id);
    int at;
    st->nkeys = count_argument(t, 4, &at);
    if (st->nkeys == 0) bad_arguments("No key column.");
    for (int i = 0; i < st->nkeys; i++) {
        st->keys[i] = resolve_column(rel, t->tgargs[at + i], "key");
        lookup_output(desc, st->keys[i], &st->key_out[i], cxt);
    }
    st->nparts = count_argument(t, at + st->nkeys, &at);
    if (st->nparts == 0) bad_arguments("No partition-key column.");
    for (int i = 0; i < st->nparts; i++) {
        st->parts[i] = resolve_column(rel, t->tgargs[at + i], "partition key");
        lookup_output(desc, st->parts[i], &st->part_out[i], cxt);
    }
    st->part_is_key = st->nkeys == 1 && st->nparts == 1 && st->parts[0] == st->keys[0];
    at += st->nparts;
    if (at != t->tgnargs - 1) bad_arguments("Expected the tenant column as the last argument.");
    if (t->tgargs[at][0] != '\0') {
        st->tenant = resolve_column(rel, t->tgargs[at], "tenant");
        lookup_output(desc, st->tenant, &st->tenant_out, cxt);
    }
    // to_jsonb() reads its argument type from the call expression, so give it one.
    fmgr_info_cxt(F_TO_JSONB, &st->to_jsonb, cxt);
    MemoryContext old = MemoryContextSwitchTo(cxt);
    Node *expr = (Node *)makeFuncExpr(F_TO_JSONB, JSONBOID, list_make1(makeNullConst(desc->tdtypeid, -1, InvalidOid)),
                                      InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
    MemoryContextSwitchTo(old);
    fmgr_info_set_expr(expr, &st->to_jsonb);
    if (!st->keys_only) st->image = changefeed_row_image_plan(desc, cxt);
    fcinfo->flinfo->fn_extra = st;
    return st;
}

// Whether this process applies a Citus shard move or split to the new
// placement, by the subscription Citus makes for it (scale_out/citus.sql).
// What it applies was logged where it was written, by the old placement.
bool applies_shard_transfer() {
    if (MySubscription == NULL) return false;
    const char *name = MySubscription->name;
    return strncmp(name, "citus_shard_move_subscription_", strlen("citus_shard_move_subscription_")) == 0 ||
           strncmp(name, "citus_shard_split_subscription_", strlen("citus_shard_split_subscription_")) == 0;
}

// Whether a write is captured.  One made in replica mode (logical
// replication apply, or a session that set session_replication_role =
// replica) is captured only when the table was enabled with replicated =>
// true; otherwise it is refused, never let through; a Citus shard transfer's
// is neither (above).
bool captures_replica_mode(bool replicated, Relation rel) {
    if (SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA) return true;
    if (applies_shard_transfer()) return false;
    if (replicated) return true;
    ereport(ERROR,
            (errcode(changefeed::kWriteRefused),
             errmsg("write to %s with session_replication_role = replica would escape capture", relation_name(rel)),
             errdetail("The table is enabled for changefeed without replicated => true."),
             errhint("To capture replicated writes, disable the table with changefeed.disable() and "
                     "enable it again with replicated => true; or write with "
                     "session_replication_role = origin.")));
    return false;
}

// The identity of one image: its document id, partition key and tenant
// (NULL: none), in canonical text (identity.hpp).
struct Identity {
    char *doc;
    char *part;
    char *tenant;
};

void column_values(const AttrNumber *attnums, FmgrInfo *outs, int n, HeapTuple tuple, TupleDesc desc,
                   IdentityValue *values) {
    for (int i = 0; i < n; i++) {
        values[i].value = heap_getattr(tuple, attnums[i], desc, &values[i].isnull);
        values[i].out = &outs[i];
    }
}

// Inside changefeed_canonical().
void identify(CaptureState *st, HeapTuple tuple, TupleDesc desc, Identity *id) {
    IdentityValue values[kMaxKeys];
    column_values(st->keys, st->key_out, st->nkeys, tuple, desc, values);
    id->doc = changefeed_document_id(values, st->nkeys);
    if (st->part_is_key) {
        id->part = id->doc;
    } else {
        column_values(st->parts, st->part_out, st->nparts, tuple, desc, values);
        id->part = changefeed_partition_key(values, st->nparts);
    }
    id->tenant = NULL;
    if (st->tenant > 0) {
        column_values(&st->tenant, &st->tenant_out, 1, tuple, desc, values);
        id->tenant = changefeed_identity_text(&values[0]);
    }
}

Datum row_jsonb(CaptureState *st, HeapTuple tuple, TupleDesc desc) {
    Datum image = st->image ? changefeed_row_image(st->image, tuple, desc) : (Datum)0;
    if (image != (Datum)0) return image;
    return FunctionCall1(&st->to_jsonb, heap_copy_tuple_as_datum(tuple, desc));
}

// Whether any of columns `cols` differs between the two rows, byte for byte
// (different bytes may still be the same text: a compressed value).
bool columns_changed(const AttrNumber *cols, int n, HeapTuple older, HeapTuple newer, TupleDesc desc) {
    for (int i = 0; i < n; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, cols[i] - 1);
        bool null_old, null_new;
        Datum a = heap_getattr(older, cols[i], desc, &null_old);
        Datum b = heap_getattr(newer, cols[i], desc, &null_new);
        if (null_old != null_new) return true;
        if (!null_old && !datumIsEqual(a, b, att->attbyval, att->attlen)) return true;
    }
    return false;
}

bool key_changed(CaptureState *st, HeapTuple older, HeapTuple newer, TupleDesc desc) {
    return columns_changed(st->keys, st->nkeys, older, newer, desc);
}

bool partition_key_changed(CaptureState *st, HeapTuple older, HeapTuple newer, TupleDesc desc) {
    return columns_changed(st->parts, st->nparts, older, newer, desc);
}

// The old tenant of an update that moves the row to another tenant (its text,
// or NULL for a null tenant), in *moved; false when the tenant stays.  Inside
// changefeed_canonical(); `now` is the new image's tenant text.
bool tenant_moved(CaptureState *st, HeapTuple older, HeapTuple newer, TupleDesc desc, const char *now, char **moved) {
    if (st->tenant <= 0) return false;
    Form_pg_attribute att = TupleDescAttr(desc, st->tenant - 1);
    IdentityValue was;
    bool null_new;
    was.value = heap_getattr(older, st->tenant, desc, &was.isnull);
    was.out = &st->tenant_out;
    Datum b = heap_getattr(newer, st->tenant, desc, &null_new);
    if (was.isnull && null_new) return false;
    if (was.isnull == null_new && datumIsEqual(was.value, b, att->attbyval, att->attlen)) return false;
    // Different bytes may still be the same tenant (a compressed value): the
    // tenant is its text, as read() and bindings compare it.
    char *was_text = changefeed_identity_text(&was);
    if (was_text != NULL && now != NULL && strcmp(was_text, now) == 0) return false;
    *moved = was_text;
    return true;
}

// What one row trigger call logs: its operation, images and their identities,
// made in one pass under the canonical settings (identify_row).
struct RowChange {
    CaptureState *st;
    TupleDesc desc;
    char op;  // c, r, d; m: a replace that moved tenants; k: a replace of the key (a delete and a create)
    HeapTuple newer;
    HeapTuple older;
    Identity of_newer;
    Identity of_older;
    char *moved_from;
    char *previous_part;  // a replace that changed the partition key: the key before
};

void identify_row(void *arg) {
    RowChange *c = (RowChange *)arg;
    if (c->newer) identify(c->st, c->newer, c->desc, &c->of_newer);
    if (c->op == 'd' || c->op == 'k') identify(c->st, c->older, c->desc, &c->of_older);
    if (c->op == 'r' && tenant_moved(c->st, c->older, c->newer, c->desc, c->of_newer.tenant, &c->moved_from))
        c->op = 'm';
    if ((c->op == 'r' || c->op == 'm') && !c->st->part_is_key &&
        partition_key_changed(c->st, c->older, c->newer, c->desc)) {
        IdentityValue values[kMaxKeys];
        column_values(c->st->parts, c->st->part_out, c->st->nparts, c->older, c->desc, values);
        char *was = changefeed_partition_key(values, c->st->nparts);
        if (strcmp(was, c->of_newer.part) != 0) c->previous_part = was;
    }
}

// Writes one row of changefeed.log in the writer's transaction.  Op 'm' is a
// replace that moved the row from tenant `moved_from` (NULL: no tenant) to
// the new image's: a tenant-scoped read shows it to the old tenant as a
// delete and to the new one as a create (read/read.sql).  A replace that
// changed the partition key (`previous_part`) is also written, the same row
// but op 'x', into the range of the key before, under that key: a reader
// whose sight the row left (its tenant, its policies) gets the delete there,
// in the order of the range the document was in (read/window_filter.hpp); every
// other reader skips it.
void log_change(CaptureState *st, TupleDesc desc, char op, HeapTuple newer, HeapTuple older, const Identity *id,
                const char *moved_from = NULL, const char *previous_part = NULL) {
    LogRow row;
    row.collection_id = st->collection_id;
    row.range_id = (int32)(changefeed_range_hash(id->part, strlen(id->part)) % (uint32)st->ranges);
    row.doc_id = CStringGetTextDatum(id->doc);
    row.partition_key = CStringGetTextDatum(id->part);
    row.op = op;
    row.current = newer && !st->keys_only ? row_jsonb(st, newer, desc) : (Datum)0;
    row.previous = older && st->keep_previous ? row_jsonb(st, older, desc) : (Datum)0;
    // A replace keeps what its image before differs by (previous_patch.cpp).
    if (row.current != (Datum)0 && row.previous != (Datum)0)
        row.previous = changefeed_previous_patch(row.current, row.previous);
    row.ttl_expired = op == 'd' && changefeed_ttl_sweep_active(st->collection_id);
    row.tenant = id->tenant ? CStringGetTextDatum(id->tenant) : (Datum)0;
    row.previous_tenant = moved_from ? CStringGetTextDatum(moved_from) : (Datum)0;
    row.schema_version = st->schema_version;
    row.previous_partition_key = previous_part ? CStringGetTextDatum(previous_part) : (Datum)0;
    changefeed_log_write(&row);
    if (previous_part != NULL) {
        row.op = 'x';
        row.range_id = (int32)(changefeed_range_hash(previous_part, strlen(previous_part)) % (uint32)st->ranges);
        row.partition_key = row.previous_partition_key;
        row.previous_partition_key = (Datum)0;
        changefeed_log_write(&row);
    }
}

void check_trigger(FunctionCallInfo fcinfo, const char *name) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR,
                (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED), errmsg("%s must be called as a trigger", name)));
    TriggerData *trig = (TriggerData *)fcinfo->context;
    if (!TRIGGER_FIRED_AFTER(trig->tg_event))
        ereport(ERROR,
                (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED), errmsg("%s must be an AFTER trigger", name)));
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
    if (!captures_replica_mode(st->replicated, trig->tg_relation)) return PointerGetDatum(NULL);
    RowChange c = {};
    c.st = st;
    c.desc = RelationGetDescr(trig->tg_relation);
    if (TRIGGER_FIRED_BY_INSERT(trig->tg_event)) {
        c.op = 'c';
        c.newer = trig->tg_trigtuple;
    } else if (TRIGGER_FIRED_BY_UPDATE(trig->tg_event)) {
        c.older = trig->tg_trigtuple;
        c.newer = trig->tg_newtuple;
        // A new primary key is a new document: the old one is deleted.
        c.op = key_changed(st, c.older, c.newer, c.desc) ? 'k' : 'r';
    } else if (TRIGGER_FIRED_BY_DELETE(trig->tg_event)) {
        c.op = 'd';
        c.older = trig->tg_trigtuple;
    } else {
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.capture_row() fired by an unexpected event")));
    }
    changefeed_canonical(identify_row, &c);
    if (c.op == 'k') {
        log_change(st, c.desc, 'd', NULL, c.older, &c.of_older);
        log_change(st, c.desc, 'c', c.newer, NULL, &c.of_newer);
    } else {
        log_change(st, c.desc, c.op, c.newer, c.older, c.op == 'd' ? &c.of_older : &c.of_newer, c.moved_from,
                   c.previous_part);
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
    if (t->tgnargs != 3)
        ereport(ERROR, (errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
                        errmsg("changefeed.capture_truncate() expects 3 trigger arguments, got %d", t->tgnargs),
                        errhint("Install it with changefeed.enable().")));
    int32 collection_id = pg_strtoint32(t->tgargs[0]);
    int32 ranges = pg_strtoint32(t->tgargs[1]);
    check_collection_table(collection_id, trig->tg_relation, "changefeed.capture_truncate()");
    if (!captures_replica_mode(t->tgargs[2][0] == 't', trig->tg_relation)) return PointerGetDatum(NULL);

    for (int32 range = 0; range < ranges; range++) {
        LogRow row = {};
        row.collection_id = collection_id;
        row.range_id = range;
        row.op = 't';
        changefeed_log_write(&row);
    }

    changefeed_truncate_done();
    changefeed_note_capture(collection_id);
    return PointerGetDatum(NULL);
}

}  // extern "C"
