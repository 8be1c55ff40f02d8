// The C half of the capture guard (the SQL half is extension/guard/guard.sql).
//
//  - A backend-local switch that suspends the guard while the extension runs
//    its own DDL (enable/disable/alter); it is reset at every transaction end
//    and subtransaction abort, so an error can never leave it on.
//  - The TRUNCATE guard: a BEFORE TRUNCATE statement trigger on every
//    partition of an enabled partitioned table.  TRUNCATE of the root fires
//    the root's guard first, which marks the statement; the partitions' guards
//    then let it through (the root's capture trigger logs the clear).  A
//    TRUNCATE naming a partition alone is refused.
//  - Facts about a DDL command that its catalog state does not show: which
//    partitions an ALTER TABLE attached, whether CREATE TRIGGER was OR REPLACE,
//    and (at ddl_command_start) whether it detaches a partition, gives a
//    generated column a new expression or changes a column's type in a way
//    that changes stored values (rewrites.cpp judges which).
//  - The table_rewrite backstop: a rewrite that computes values (a type
//    change not approved at ddl_command_start, a column added with a volatile
//    default) of an enabled table or one of its partitions is refused.
#include "pg.hpp"
#include "access/as_owner.hpp"
#include "guard/guard.hpp"
#include "guard/partition_drops.hpp"
#include "guard/rewrites.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/event_trigger.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/deparse_utility.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/syscache.h"
}

namespace {

bool guard_suspended = false;
bool callbacks_registered = false;

// The TRUNCATE of a root in progress, set by the root's guard trigger.
int32 truncating_collection = 0;

void reset_xact(XactEvent event, void *) {
    if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_COMMIT ||
        event == XACT_EVENT_PARALLEL_ABORT || event == XACT_EVENT_PREPARE) {
        guard_suspended = false;
        truncating_collection = 0;
        changefeed_forget_rewrite();
    }
}

void reset_subxact(SubXactEvent event, SubTransactionId, SubTransactionId, void *) {
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        guard_suspended = false;
        truncating_collection = 0;
    }
}

void register_callbacks(void) {
    if (callbacks_registered) return;
    RegisterXactCallback(reset_xact, NULL);
    RegisterSubXactCallback(reset_subxact, NULL);
    callbacks_registered = true;
}

// Whether `rel` or one of its ancestors is an enabled table (asked in SQL,
// where the collection catalog lives, as the catalog's owner).  Returns the
// enabled table's name or NULL.
char *enabled_table_above(Oid rel) {
    AsOwner as_owner;
    as_owner_begin(changefeed_catalog_owner(), &as_owner);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
    Oid argtypes[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(rel)};
    int rc = SPI_execute_with_args("SELECT c.relid::pg_catalog.oid FROM changefeed.enabled_above($1) c", 1, argtypes,
                                   args, NULL, true, 1);
    Oid enabled = InvalidOid;
    if (rc == SPI_OK_SELECT && SPI_processed == 1) {
        bool isnull;
        Datum value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
        if (!isnull) enabled = DatumGetObjectId(value);
    }
    SPI_finish();
    as_owner_end(&as_owner);
    // Named as the caller's search_path shows it.
    return OidIsValid(enabled) ? DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(enabled))) : NULL;
}

// The table of an ALTER TABLE that changes a column's type, locked so that no
// concurrent type change slips between the judgment here and the command.
// Its owner takes the command's own lock at once; anyone else ACCESS SHARE
// only (what a SELECT takes): PostgreSQL will refuse a stranger's ALTER, which
// must not queue an exclusive lock on someone else's table meanwhile.
Oid lock_retyped_table(AlterTableStmt *stmt, Oid caller) {
    Oid rel = RangeVarGetRelid(stmt->relation, NoLock, true);
    if (!OidIsValid(rel)) return InvalidOid;
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(rel));
    if (!HeapTupleIsValid(tuple)) return InvalidOid;
    Oid owner = ((Form_pg_class)GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    LOCKMODE mode = has_privs_of_role(caller, owner) ? AccessExclusiveLock : AccessShareLock;
    return RangeVarGetRelid(stmt->relation, mode, true);
}

// pg_event_trigger_table_rewrite_oid() and _reason(), called from C.
Datum table_rewrite_fact(PGFunction fact) {
    LOCAL_FCINFO(call, 0);
    InitFunctionCallInfoData(*call, NULL, 0, InvalidOid, NULL, NULL);
    return fact(call);
}

}  // namespace

bool changefeed_guard_is_suspended(void) {
    return guard_suspended;
}

// Called by capture_truncate once the root's TRUNCATE has been logged.
void changefeed_truncate_done(void) {
    truncating_collection = 0;
}

extern "C" {

PG_FUNCTION_INFO_V1(changefeed_suspend_guard);
PG_FUNCTION_INFO_V1(changefeed_guard_suspended);
PG_FUNCTION_INFO_V1(changefeed_guard_truncate);
PG_FUNCTION_INFO_V1(changefeed_attaches_partition);
PG_FUNCTION_INFO_V1(changefeed_renames_enum_value);
PG_FUNCTION_INFO_V1(changefeed_replaces_trigger);
PG_FUNCTION_INFO_V1(changefeed_guard_detach);
PG_FUNCTION_INFO_V1(changefeed_guard_rewrite);

// suspend_guard(on bool) returns the previous setting, so calls can nest.
Datum changefeed_suspend_guard(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED), errmsg("suspend_guard(null)")));
    register_callbacks();
    bool previous = guard_suspended;
    guard_suspended = PG_GETARG_BOOL(0);
    PG_RETURN_BOOL(previous);
}

Datum changefeed_guard_suspended(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(guard_suspended);
}

// BEFORE TRUNCATE FOR EACH STATEMENT; arguments: collection id, 'root' or 'partition'.
Datum changefeed_guard_truncate(PG_FUNCTION_ARGS) {
    if (!CALLED_AS_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.guard_truncate() must be called as a trigger")));
    TriggerData *trig = (TriggerData *)fcinfo->context;
    Trigger *t = trig->tg_trigger;
    if (!TRIGGER_FIRED_BY_TRUNCATE(trig->tg_event) || !TRIGGER_FIRED_BEFORE(trig->tg_event) || t->tgnargs != 2)
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.guard_truncate() must be a BEFORE TRUNCATE trigger with 2 arguments")));
    register_callbacks();
    int32 collection_id = pg_strtoint32(t->tgargs[0]);
    if (strcmp(t->tgargs[1], "root") == 0) {
        truncating_collection = collection_id;
    } else if (truncating_collection != collection_id) {
        Relation rel = trig->tg_relation;
        ereport(ERROR, (errcode(changefeed::kDdlRefused),
                        errmsg("TRUNCATE of partition %s would let its rows leave an enabled table without a change",
                               quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
                                                          RelationGetRelationName(rel))),
                        errdetail("Its partitioned table is enabled for changefeed (collection %d); a TRUNCATE of "
                                  "the partitioned table is captured, one of a partition is not.",
                                  collection_id),
                        errhint("Delete the rows instead, truncate the partitioned table, or disable capture "
                                "first with changefeed.disable().")));
    }
    return PointerGetDatum(NULL);
}

// renames_enum_value(pg_ddl_command): whether an ALTER TYPE renamed a value
// of an enum (its parse tree: RENAME VALUE has the old value).
Datum changefeed_renames_enum_value(PG_FUNCTION_ARGS) {
    CollectedCommand *cmd = (CollectedCommand *)PG_GETARG_POINTER(0);
    PG_RETURN_BOOL(cmd->type == SCT_Simple && cmd->parsetree != NULL && IsA(cmd->parsetree, AlterEnumStmt) &&
                   ((AlterEnumStmt *)cmd->parsetree)->oldVal != NULL);
}

// attaches_partition(pg_ddl_command): whether an ALTER TABLE attached a
// partition.  (Its parse tree names the partition, but resolving that name
// here, outside the user's search_path, could find another table; the guard
// looks at the tree of the ALTER TABLE's target instead.)
Datum changefeed_attaches_partition(PG_FUNCTION_ARGS) {
    CollectedCommand *cmd = (CollectedCommand *)PG_GETARG_POINTER(0);
    if (cmd->type == SCT_AlterTable) {
        ListCell *lc;
        foreach (lc, cmd->d.alterTable.subcmds) {
            CollectedATSubcmd *sub = (CollectedATSubcmd *)lfirst(lc);
            AlterTableCmd *at = (AlterTableCmd *)sub->parsetree;
            if (IsA(at, AlterTableCmd) && at->subtype == AT_AttachPartition) PG_RETURN_BOOL(true);
        }
    }
    PG_RETURN_BOOL(false);
}

// replaces_trigger(pg_ddl_command): whether it is CREATE OR REPLACE TRIGGER.
Datum changefeed_replaces_trigger(PG_FUNCTION_ARGS) {
    CollectedCommand *cmd = (CollectedCommand *)PG_GETARG_POINTER(0);
    bool replace = cmd->type == SCT_Simple && cmd->parsetree != NULL && IsA(cmd->parsetree, CreateTrigStmt) &&
                   ((CreateTrigStmt *)cmd->parsetree)->replace;
    PG_RETURN_BOOL(replace);
}

// ddl_command_start on ALTER TABLE of an enabled table or one of its
// partitions: refuses
//  - DETACH PARTITION (also CONCURRENTLY, whose first transaction commits
//    before ddl_command_end could refuse it): the rows would leave the table,
//    unless the collection expires or forgets detached partitions
//    (partition_drops.cpp);
//  - ALTER COLUMN ... SET EXPRESSION (17 and newer): the table is rewritten
//    with the column's new values, which no row trigger sees;
//  - ALTER COLUMN ... TYPE that changes or reinterprets stored values
//    (rewrites.cpp); one that keeps them is approved, so that its rewrite (a
//    domain's check) passes the table_rewrite backstop.  Only here are the
//    column's old type and the USING expression both known.
// It runs as the role whose command it is (not SECURITY DEFINER): the table
// and type names resolve with that role's search_path, "$user" included, as
// the command will resolve them; only the catalog work runs as the catalog's
// owner (enabled_table_above, partition_drops.cpp).
Datum changefeed_guard_detach(PG_FUNCTION_ARGS) {
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.guard_detach() must be called as an event trigger")));
    if (guard_suspended) PG_RETURN_VOID();
    changefeed_forget_rewrite();
    EventTriggerData *data = (EventTriggerData *)fcinfo->context;
    if (data->parsetree == NULL || !IsA(data->parsetree, AlterTableStmt)) PG_RETURN_VOID();
    AlterTableStmt *stmt = (AlterTableStmt *)data->parsetree;
    bool detaches = false;
    bool retypes = false;
    const char *new_expression_of = NULL;
    ListCell *lc;
    foreach (lc, stmt->cmds) {
        AlterTableCmd *at = (AlterTableCmd *)lfirst(lc);
        if (!IsA(at, AlterTableCmd)) continue;
        if (at->subtype == AT_DetachPartition || at->subtype == AT_DetachPartitionFinalize) detaches = true;
        if (at->subtype == AT_AlterColumnType) retypes = true;
        if (changefeed_sets_expression(at->subtype) && new_expression_of == NULL) new_expression_of = at->name;
    }
    if ((!detaches && !retypes && new_expression_of == NULL) || stmt->relation == NULL) PG_RETURN_VOID();
    if (stmt->relation->relpersistence == RELPERSISTENCE_TEMP) PG_RETURN_VOID();
    Oid caller = GetUserId();
    Oid parent = retypes ? lock_retyped_table(stmt, caller) : RangeVarGetRelid(stmt->relation, NoLock, true);
    if (!OidIsValid(parent)) PG_RETURN_VOID();
    char *enabled = enabled_table_above(parent);
    if (enabled == NULL) PG_RETURN_VOID();
    if (new_expression_of != NULL)
        ereport(ERROR,
                (errcode(changefeed::kDdlRefused),
                 errmsg("SET EXPRESSION of column %s of %s would rewrite its values without a change in the feed",
                        quote_identifier(new_expression_of), stmt->relation->relname),
                 errdetail("Table %s is enabled for changefeed; the rewrite that computes the column's new "
                           "values fires no row trigger.",
                           enabled),
                 errhint("Disable capture first with SELECT changefeed.disable(%s);", quote_literal_cstr(enabled))));
    if (retypes) {
        foreach (lc, stmt->cmds) {
            AlterTableCmd *at = (AlterTableCmd *)lfirst(lc);
            if (!IsA(at, AlterTableCmd) || at->subtype != AT_AlterColumnType) continue;
            const char *problem = changefeed_type_change_problem(parent, at);
            if (problem != NULL)
                ereport(
                    ERROR,
                    (errcode(changefeed::kDdlRefused),
                     errmsg("ALTER COLUMN %s TYPE would change the stored values of %s without a change in the feed",
                            quote_identifier(at->name), stmt->relation->relname),
                     errdetail("Table %s is enabled for changefeed, and %s; the rewrite fires no row trigger. "
                               "Only a wider length or precision of the same type, varchar to text and back, "
                               "or a domain over the same type keep every value.",
                               enabled, problem),
                     errhint("Add a new column and fill it with an UPDATE, which the feed captures; or disable "
                             "capture with SELECT changefeed.disable(%s); alter, and enable it again (readers "
                             "see history lost).",
                             quote_literal_cstr(enabled))));
        }
        register_callbacks();
        changefeed_approve_rewrite(data->parsetree);
    }
    if (!detaches) PG_RETURN_VOID();
    // Unless the collection expires or forgets detached partitions.
    if (!changefeed_partition_detach(stmt, parent, caller))
        ereport(ERROR,
                (errcode(changefeed::kDdlRefused),
                 errmsg("DETACH PARTITION from %s would let rows leave an enabled table without a change",
                        stmt->relation->relname),
                 errdetail("Table %s is enabled for changefeed.", enabled),
                 errhint("Disable capture first with SELECT changefeed.disable(%s);", quote_literal_cstr(enabled))));
    PG_RETURN_VOID();
}

// table_rewrite: refuses a rewrite of an enabled table or one of its
// partitions that writes computed values into its rows: a column added with a
// volatile default, as serial, identity or stored generated column, or of a
// domain with constraints (reason AT_REWRITE_DEFAULT_VAL), or a type change
// not approved at ddl_command_start (AT_REWRITE_COLUMN_REWRITE).  A change of
// persistence or access method copies the values as they are and passes.
// SECURITY DEFINER with a pinned search_path (it resolves no name).
Datum changefeed_guard_rewrite(PG_FUNCTION_ARGS) {
    if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                        errmsg("changefeed.guard_rewrite() must be called as an event trigger")));
    if (guard_suspended) PG_RETURN_VOID();
    EventTriggerData *data = (EventTriggerData *)fcinfo->context;
    int reason = DatumGetInt32(table_rewrite_fact(pg_event_trigger_table_rewrite_reason));
    bool fills = (reason & AT_REWRITE_DEFAULT_VAL) != 0;
    bool retypes = (reason & AT_REWRITE_COLUMN_REWRITE) != 0;
    if (!fills && (!retypes || changefeed_rewrite_approved(data->parsetree))) PG_RETURN_VOID();
    Oid rel = DatumGetObjectId(table_rewrite_fact(pg_event_trigger_table_rewrite_oid));
    char *enabled = enabled_table_above(rel);
    if (enabled == NULL) PG_RETURN_VOID();
    char *name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(rel)), get_rel_name(rel));
    if (fills)
        ereport(ERROR,
                (errcode(changefeed::kDdlRefused),
                 errmsg("ALTER TABLE would write computed values into every row of %s without a change in the feed",
                        name),
                 errdetail("Table %s is enabled for changefeed; a column added with a volatile default, as serial "
                           "or identity, as a stored generated column or of a domain with constraints is filled "
                           "in by a rewrite that fires no row trigger.",
                           enabled),
                 errhint("Add the column without a default, SET DEFAULT for new rows, then fill the existing rows "
                         "with an UPDATE, which the feed captures; or disable capture with SELECT "
                         "changefeed.disable(%s); alter, and enable it again (readers see history lost).",
                         quote_literal_cstr(enabled))));
    ereport(ERROR,
            (errcode(changefeed::kDdlRefused),
             errmsg("ALTER TABLE would rewrite the values of %s without a change in the feed", name),
             errdetail("Table %s is enabled for changefeed; a column type change rewrites every row and fires no "
                       "row trigger.",
                       enabled),
             errhint("Add a new column and fill it with an UPDATE, which the feed captures; or disable capture "
                     "with SELECT changefeed.disable(%s); alter, and enable it again (readers see history lost).",
                     quote_literal_cstr(enabled))));
    PG_RETURN_VOID();
}

}  // extern "C"
