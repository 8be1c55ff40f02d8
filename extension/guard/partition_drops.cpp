// Partition retention: a DROP TABLE or DETACH PARTITION of a partition of an
// enabled table does what the collection's partition_drops says.
//
//  - 'refuse' (the default): the guard refuses it (CF013, guard/guard.sql).
//  - 'expire': at ddl_command_start, before the rows go, every row of the
//    partition (and of its partitions) is logged as a delete with
//    ttl_expired, in the DDL's transaction, under the lock the DDL takes
//    anyway; so a projection of the table removes them as it removes TTL
//    expiry.  DETACH ... CONCURRENTLY is refused: it commits before it is
//    done, while writes may still reach the partition.
//  - 'forget': nothing is logged (an event table whose consumers keep their
//    own history); the horizon does not move: no position reports loss.
//
// The guards run as the role whose DDL it is: the partition is the one its
// search_path names.  The collection catalog is read as the catalog's owner.
// The rows are read as the partition's owner inside a security-restricted
// operation with search_path pinned (to_jsonb may run the owner's casts), the
// way the TTL sweep deletes (ttl.cpp), and written to the log as capture
// writes them (log_writer.cpp), batch by batch from one scan.  Every row must
// be read: a partition whose row-level security binds its owner (FORCE ROW
// LEVEL SECURITY) is refused, and row_security is off while reading, so a
// policy can never hide a row from the expiry, only fail it.
#include "pg.hpp"
#include "access/as_owner.hpp"
#include "capture/identity.hpp"
#include "capture/range_hash.hpp"
#include "capture/schema_versions.hpp"
#include "capture/xact_tracking.hpp"
#include "guard/guard.hpp"
#include "guard/partition_drops.hpp"
#include "log/log_writer.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/event_trigger.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/guc.h"
#include "utils/rls.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(changefeed_guard_drop_partition);
PG_FUNCTION_INFO_V1(changefeed_partition_expired);
}

namespace {

constexpr long kBatch = 1000;

// The partitions expired in this transaction (sql_drop lets their drop pass).
List *expired = NIL;
LocalTransactionId expired_in = InvalidLocalTransactionId;

LocalTransactionId this_transaction(void) {
#if PG_VERSION_NUM >= 170000
    return MyProc->vxid.lxid;
#else
    return MyProc->lxid;
#endif
}

struct Collection {
    int32 id;
    char *mode;
    int32 ranges;
    bool keep_previous;
    Oid relid;
    char *table;
    int nkeys;
    Datum *keys;
    int nparts;
    Datum *parts;
    char *tenant;
};

char *copy_text(HeapTuple tuple, TupleDesc desc, int col) {
    char *value = SPI_getvalue(tuple, desc, col);
    return value ? MemoryContextStrdup(TopTransactionContext, value) : NULL;
}

void text_array(HeapTuple tuple, TupleDesc desc, int col, Datum **items, int *n) {
    bool isnull;
    Datum d = SPI_getbinval(tuple, desc, col, &isnull);
    MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
    deconstruct_array(DatumGetArrayTypePCopy(d), TEXTOID, -1, false, TYPALIGN_INT, items, NULL, n);
    MemoryContextSwitchTo(old);
}

// The enabled table above partition `rel` (not `rel` itself), if any.
bool collection_above(Oid rel, Collection *c) {
    AsOwner as_owner;
    as_owner_begin(changefeed_catalog_owner(), &as_owner);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    Oid argtypes[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(rel)};
    int rc = SPI_execute_with_args(
        "SELECT c.id, c.partition_drops, c.ranges, c.keep_previous, c.relid::pg_catalog.oid,"
        " c.key_columns, c.partition_key, c.tenant_column"
        " FROM changefeed.enabled_above($1) c WHERE c.relid::pg_catalog.oid OPERATOR(pg_catalog.<>) $1",
        1, argtypes, args, NULL, true, 1);
    bool found = rc == SPI_OK_SELECT && SPI_processed == 1;
    if (found) {
        HeapTuple t = SPI_tuptable->vals[0];
        TupleDesc d = SPI_tuptable->tupdesc;
        bool isnull;
        c->id = DatumGetInt32(SPI_getbinval(t, d, 1, &isnull));
        c->mode = copy_text(t, d, 2);
        c->ranges = DatumGetInt32(SPI_getbinval(t, d, 3, &isnull));
        c->keep_previous = DatumGetBool(SPI_getbinval(t, d, 4, &isnull));
        c->relid = DatumGetObjectId(SPI_getbinval(t, d, 5, &isnull));
        text_array(t, d, 6, &c->keys, &c->nkeys);
        text_array(t, d, 7, &c->parts, &c->nparts);
        c->tenant = copy_text(t, d, 8);
    }
    SPI_finish();
    as_owner_end(&as_owner);
    // Named as the caller's search_path shows it.
    if (found) c->table = DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(c->relid)));
    return found;
}

const char *column(Datum name) {
    return quote_identifier(TextDatumGetCString(name));
}

// The query that yields, per row of `qualified`, what capture would log for
// its delete: the key columns, the partition-key columns, the previous image
// and the tenant column (or a null), whose texts identify_batch() makes as
// capture makes them.
char *expiry_query(const Collection *c, const char *qualified) {
    StringInfoData q;
    initStringInfo(&q);
    appendStringInfoString(&q, "SELECT ");
    for (int i = 0; i < c->nkeys; i++) appendStringInfo(&q, "x.%s, ", column(c->keys[i]));
    for (int i = 0; i < c->nparts; i++) appendStringInfo(&q, "x.%s, ", column(c->parts[i]));
    appendStringInfoString(&q, c->keep_previous ? "to_jsonb(x)" : "NULL::jsonb");
    if (c->tenant != NULL)
        appendStringInfo(&q, ", x.%s", quote_identifier(c->tenant));
    else
        appendStringInfoString(&q, ", NULL::text");
    appendStringInfo(&q, " FROM %s x", qualified);
    return q.data;
}

// One fetched batch of a partition's rows (SPI_tuptable) and their identities.
struct ExpiryBatch {
    const Collection *c;
    FmgrInfo *outs;  // per column of the query (the image's unused)
    char **docs;
    char **parts;
    char **tenants;
};

// Inside changefeed_canonical(): the texts of each row of the batch.
void identify_batch(void *arg) {
    ExpiryBatch *b = (ExpiryBatch *)arg;
    const Collection *c = b->c;
    TupleDesc desc = SPI_tuptable->tupdesc;
    int image_col = c->nkeys + c->nparts + 1;  // 1-based; the tenant follows it
    IdentityValue values[INDEX_MAX_KEYS * 2 + 2];
    for (uint64 i = 0; i < SPI_processed; i++) {
        HeapTuple row = SPI_tuptable->vals[i];
        for (int col = 1; col <= image_col + 1; col++) {
            if (col == image_col) continue;
            IdentityValue *v = &values[col - 1];
            v->value = SPI_getbinval(row, desc, col, &v->isnull);
            v->out = &b->outs[col - 1];
        }
        b->docs[i] = changefeed_document_id(values, c->nkeys);
        b->parts[i] = changefeed_partition_key(values + c->nkeys, c->nparts);
        b->tenants[i] = changefeed_identity_text(&values[image_col]);
    }
}

// Logs the batch as expired deletes.
void expire_batch(ExpiryBatch *b) {
    const Collection *c = b->c;
    b->docs = (char **)palloc(sizeof(char *) * SPI_processed);
    b->parts = (char **)palloc(sizeof(char *) * SPI_processed);
    b->tenants = (char **)palloc(sizeof(char *) * SPI_processed);
    changefeed_canonical(identify_batch, b);
    int image_col = c->nkeys + c->nparts + 1;
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool no_previous;
        Datum previous = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, image_col, &no_previous);
        LogRow log = {};
        log.collection_id = c->id;
        log.range_id = (int32)(changefeed_range_hash(b->parts[i], strlen(b->parts[i])) % (uint32)c->ranges);
        log.doc_id = CStringGetTextDatum(b->docs[i]);
        log.partition_key = CStringGetTextDatum(b->parts[i]);
        log.op = 'd';
        log.previous = no_previous ? (Datum)0 : previous;
        log.ttl_expired = true;
        log.tenant = b->tenants[i] ? CStringGetTextDatum(b->tenants[i]) : (Datum)0;
        log.schema_version = changefeed_schema_version(c->id);
        changefeed_log_write(&log);
    }
}

// Logs every row of partition `part` (locked by the caller) as an expired
// delete of collection `c`, for `command`.  Returns how many.
int64 expire_rows(const Collection *c, Oid part, const char *command) {
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(part));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "changefeed: cache lookup failed for relation %u", part);
    Form_pg_class form = (Form_pg_class)GETSTRUCT(tuple);
    Oid owner = form->relowner;
    char *qualified = pstrdup(quote_qualified_identifier(get_namespace_name(form->relnamespace),
                                                         NameStr(form->relname)));
    ReleaseSysCache(tuple);
    // Forced row-level security would hide rows from the owner: they would
    // leave without a change.  (Partitions below are read through `part`,
    // whose policies alone apply.)
    if (check_enable_rls(part, owner, true) == RLS_ENABLED)
        ereport(ERROR, (errcode(changefeed::kDdlRefused),
                        errmsg("%s of partition %s refused: its row-level security may hide rows from the expiry",
                               command, qualified),
                        errdetail("Collection %d expires the rows of dropped partitions (partition_drops = 'expire'), "
                                  "read as the partition's owner, whom its policies bind (FORCE ROW LEVEL SECURITY).",
                                  c->id),
                        errhint("ALTER TABLE %s NO FORCE ROW LEVEL SECURITY first.", qualified)));
    char *sql = expiry_query(c, qualified);

    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    AsOwner as_owner;
    as_owner_begin(owner, &as_owner);
    // A policy that applies after all fails the read instead of hiding rows.
    (void)set_config_option("row_security", "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

    // On error the (sub)transaction abort restores user and settings.
    int64 logged = 0;
    ExpiryBatch batch = {c, NULL, NULL, NULL, NULL};
    MemoryContext batch_cxt = AllocSetContextCreate(CurrentMemoryContext, "changefeed expiry batch",
                                                    ALLOCSET_DEFAULT_SIZES);
    // Not read-only: a new snapshot, taken under the lock, sees every row committed before it.
    Portal portal = SPI_cursor_open_with_args(NULL, sql, 0, NULL, NULL, NULL, false, 0);
    for (;;) {
        SPI_cursor_fetch(portal, true, kBatch);
        if (SPI_processed == 0) break;
        if (batch.outs == NULL) {  // the columns' output functions, once
            TupleDesc desc = SPI_tuptable->tupdesc;
            batch.outs = (FmgrInfo *)palloc0(sizeof(FmgrInfo) * desc->natts);
            for (int i = 0; i < desc->natts; i++) {
                Oid func;
                bool varlena;
                getTypeOutputInfo(TupleDescAttr(desc, i)->atttypid, &func, &varlena);
                fmgr_info(func, &batch.outs[i]);
            }
        }
        MemoryContext old = MemoryContextSwitchTo(batch_cxt);
        expire_batch(&batch);
        MemoryContextSwitchTo(old);
        MemoryContextReset(batch_cxt);
        logged += (int64)SPI_processed;
        SPI_freetuptable(SPI_tuptable);
    }
    SPI_cursor_close(portal);

    as_owner_end(&as_owner);
    SPI_finish();
    if (logged > 0) changefeed_note_capture(c->id);
    return logged;
}

// A subtransaction that aborts takes its logged rows with it: forget what
// was expired (a later drop of the partition in this transaction is then
// refused unless it expires the rows again).
void forget_on_abort(SubXactEvent event, SubTransactionId, SubTransactionId, void *) {
    if (event == SUBXACT_EVENT_ABORT_SUB) expired = NIL;
}

void note_expired(Oid rel) {
    static bool registered = false;
    if (!registered) {
        RegisterSubXactCallback(forget_on_abort, NULL);
        registered = true;
    }
    if (expired_in != this_transaction()) {
        expired = NIL;
        expired_in = this_transaction();
    }
    MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
    expired = lappend_oid(expired, rel);
    MemoryContextSwitchTo(old);
}

// Only for a role that may drop the partition: the DDL checks that after
// ddl_command_start, and nobody else may make us lock and read its table.
bool caller_owns(Oid caller, Oid rel) {
    Oid owner;
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
    if (!HeapTupleIsValid(tuple)) return false;
    owner = ((Form_pg_class)GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    return has_privs_of_role(caller, owner);
}

// The snapshot of REPEATABLE READ may miss rows committed before the lock.
void require_read_committed(const char *command, const Collection *c) {
    if (!IsolationUsesXactSnapshot()) return;
    ereport(ERROR, (errcode(changefeed::kDdlRefused),
                    errmsg("%s of a partition of %s refused under REPEATABLE READ or SERIALIZABLE", command, c->table),
                    errdetail("Collection %d expires the rows of dropped partitions (partition_drops = 'expire'); "
                              "this transaction's snapshot may miss rows committed before the partition was locked.",
                              c->id),
                    errhint("Run it in a READ COMMITTED transaction.")));
}

// Locks the partition tree of `part` (after its parent, in the order the DDL
// locks them) and expires its rows; remembers them as expired.
void expire_partition(const Collection *c, Oid part, const char *command) {
    Oid parent = get_partition_parent(part, true);
    if (OidIsValid(parent)) LockRelationOid(parent, AccessExclusiveLock);
    List *tree = find_all_inheritors(part, AccessExclusiveLock, NULL);
    expire_rows(c, part, command);
    ListCell *lc;
    foreach (lc, tree) note_expired(lfirst_oid(lc));
}

void drop_truncate_guards(const Collection *c, Oid part) {
    AsOwner as_owner;
    as_owner_begin(changefeed_catalog_owner(), &as_owner);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    Oid argtypes[2] = {INT4OID, OIDOID};
    Datum args[2] = {Int32GetDatum(c->id), ObjectIdGetDatum(part)};
    if (SPI_execute_with_args("SELECT changefeed.drop_truncate_guards($1, $2)", 2, argtypes, args, NULL, false, 0) !=
        SPI_OK_SELECT)
        elog(ERROR, "changefeed: dropping the TRUNCATE guards of a detached partition failed");
    SPI_finish();
    as_owner_end(&as_owner);
}

}  // namespace

bool changefeed_partition_detach(AlterTableStmt *stmt, Oid parent, Oid caller) {
    ListCell *lc;
    foreach (lc, stmt->cmds) {
        AlterTableCmd *at = (AlterTableCmd *)lfirst(lc);
        if (!IsA(at, AlterTableCmd) || (at->subtype != AT_DetachPartition && at->subtype != AT_DetachPartitionFinalize))
            continue;
        PartitionCmd *pc = (PartitionCmd *)at->def;
        Oid part = pc && pc->name ? RangeVarGetRelid(pc->name, NoLock, true) : InvalidOid;
        // A partition that is not there, not a partition (get_partition_parent
        // would fail on it) or not under `parent`: the DDL fails by itself.
        if (!OidIsValid(part) || !get_rel_relispartition(part) || get_partition_parent(part, true) != parent) continue;
        Collection c;
        if (!collection_above(part, &c)) continue;
        if (strcmp(c.mode, "refuse") == 0) return false;
        bool concurrent = pc->concurrent || at->subtype == AT_DetachPartitionFinalize;
        if (strcmp(c.mode, "expire") == 0) {
            if (concurrent)
                ereport(ERROR,
                        (errcode(changefeed::kDdlRefused),
                         errmsg("DETACH PARTITION CONCURRENTLY from %s refused: its rows cannot be expired", c.table),
                         errdetail("Collection %d expires the rows of detached partitions (partition_drops = "
                                   "'expire'); a concurrent detach commits while writes may still reach the partition.",
                                   c.id),
                         errhint("Detach it without CONCURRENTLY.")));
            require_read_committed("DETACH PARTITION", &c);
            if (!caller_owns(caller, parent)) return false;
            expire_partition(&c, part, "DETACH");
        } else if (!caller_owns(caller, parent)) {
            return false;
        }
        drop_truncate_guards(&c, part);
    }
    return true;
}

extern "C" {

// ddl_command_start on DROP TABLE: expires the rows of each partition it
// names under a table with partition_drops = 'expire'.  (What is refused is
// refused at sql_drop, changefeed.guard_drop().)  It runs as the role whose
// command it is, so the names resolve as the command resolves them.
Datum changefeed_guard_drop_partition(PG_FUNCTION_ARGS) {
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.guard_drop_partition() must be called as an event trigger")));
    if (changefeed_guard_is_suspended()) PG_RETURN_VOID();
    EventTriggerData *data = (EventTriggerData *)fcinfo->context;
    if (data->parsetree == NULL || !IsA(data->parsetree, DropStmt)) PG_RETURN_VOID();
    DropStmt *stmt = (DropStmt *)data->parsetree;
    if (stmt->removeType != OBJECT_TABLE) PG_RETURN_VOID();
    Oid caller = GetUserId();
    ListCell *lc;
    foreach (lc, stmt->objects) {
        RangeVar *name = makeRangeVarFromNameList((List *)lfirst(lc));
        Oid rel = RangeVarGetRelid(name, NoLock, true);
        if (!OidIsValid(rel) || !get_rel_relispartition(rel) || get_rel_persistence(rel) == RELPERSISTENCE_TEMP)
            continue;
        Collection c;
        if (!collection_above(rel, &c) || strcmp(c.mode, "expire") != 0 || !caller_owns(caller, rel)) continue;
        require_read_committed("DROP TABLE", &c);
        expire_partition(&c, rel, "DROP TABLE");
    }
    PG_RETURN_VOID();
}

// partition_expired(rel oid): whether this transaction expired the rows of
// partition `rel` before dropping it.
Datum changefeed_partition_expired(PG_FUNCTION_ARGS) {
    Oid rel = PG_GETARG_OID(0);
    PG_RETURN_BOOL(expired_in == this_transaction() && list_member_oid(expired, rel));
}

}  // extern "C"
