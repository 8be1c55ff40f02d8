// TTL sweeper: deletes the rows of one collection whose TTL column has passed,
// marking their deletes as expiry (ttl_expired).
//
// Maintenance may run as a superuser, while the DELETE reaches code the table
// owner controls (triggers, RLS policies, operators, index expressions).  So
// the DELETE runs as the table owner inside a security-restricted operation
// with search_path pinned, the way VACUUM and REFRESH MATERIALIZED VIEW run
// user code: the owner's trigger runs with the owner's rights and cannot SET
// ROLE, create temporary objects or change session state there.
//
// Deletes are marked as expiry by a backend-local flag that capture reads
// (changefeed_ttl_sweep_active), not by a setting a writer could set itself.
#include "pg.hpp"
#include "access/as_owner.hpp"
#include "maintenance/ttl.hpp"
#include "settings.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(changefeed_expire_rows);
}

namespace {

// The collection whose sweep runs in this backend now, if any.
bool sweep_active = false;
int32 sweep_collection = 0;

// The owner and schema-qualified, quoted name of `relid`; false if it is gone.
bool read_table(Oid relid, Oid *owner, char **qualified) {
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tuple)) return false;
    Form_pg_class form = (Form_pg_class)GETSTRUCT(tuple);
    *owner = form->relowner;
    char *schema = get_namespace_name(form->relnamespace);
    *qualified = pstrdup(quote_qualified_identifier(schema, NameStr(form->relname)));
    ReleaseSysCache(tuple);
    return true;
}

// The caller may act as the table owner, or owns the extension (maintenance).
bool may_expire(Oid owner, const char *qualified) {
    Oid caller = GetUserId();
    if (has_privs_of_role(caller, owner) || pg_extension_ownercheck(get_extension_oid("changefeed", false), caller))
        return true;
    ereport(ERROR,
            (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE), errmsg("permission denied to expire rows of %s", qualified),
             errdetail("Only the table owner or the owner of the changefeed extension may.")));
    return false;
}

}  // namespace

bool changefeed_ttl_sweep_active(int32 collection_id) {
    if (sweep_active && sweep_collection == collection_id) return true;
    // A superuser's own TTL job may still mark its deletes (PGC_SUSET).
    return changefeed_delete_reason != NULL && strcmp(changefeed_delete_reason, "ttl") == 0;
}

// expire_rows(collection_id int, as_of timestamptz) RETURNS bigint: deletes
// the collection's rows whose TTL column is before `as_of`, as the table owner.
// The caller must be able to act as the table owner or own the extension.
extern "C" Datum changefeed_expire_rows(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(changefeed::kInvalidOption), errmsg("collection_id must not be null")));
    if (PG_ARGISNULL(1))
        ereport(ERROR, (errcode(changefeed::kInvalidOption), errmsg("as_of must not be null"),
                        errhint("Pass the time up to which rows are expired, e.g. now().")));
    int32 collection_id = PG_GETARG_INT32(0);
    TimestampTz as_of = PG_GETARG_TIMESTAMPTZ(1);
    if (TIMESTAMP_NOT_FINITE(as_of))
        ereport(ERROR,
                (errcode(changefeed::kInvalidOption),
                 errmsg("as_of must be a finite time, not %s", TIMESTAMP_IS_NOBEGIN(as_of) ? "-infinity" : "infinity"),
                 errhint("Pass the time up to which rows are expired, e.g. now().")));

    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed: SPI_connect failed");
    Oid argtypes[1] = {INT4OID};
    Datum args[1] = {Int32GetDatum(collection_id)};
    int rc = SPI_execute_with_args(
        "SELECT relid, ttl_column FROM changefeed.collection WHERE id OPERATOR(pg_catalog.=) $1"
        " AND disabled_at IS NULL",
        1, argtypes, args, NULL, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "changefeed: cannot read collection %d", collection_id);
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(changefeed::kNotEnabled), errmsg("collection %d is not enabled", collection_id)));
    bool isnull;
    Oid relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    char *ttl_column = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
    if (ttl_column == NULL)
        ereport(ERROR, (errcode(changefeed::kInvalidOption), errmsg("collection %d has no TTL column", collection_id)));

    // Checked before the lock (no waiting on a table one may not touch) and
    // again under it, where owner and name cannot change until the DELETE ran.
    Oid owner;
    char *qualified;
    if (!read_table(relid, &owner, &qualified) || !may_expire(owner, qualified))
        ereport(ERROR, (errcode(changefeed::kNotEnabled),
                        errmsg("the table of collection %d no longer exists", collection_id)));
    LockRelationOid(relid, RowExclusiveLock);  // waits at most lock_timeout
    if (!read_table(relid, &owner, &qualified) || !may_expire(owner, qualified))
        ereport(ERROR, (errcode(changefeed::kNotEnabled),
                        errmsg("the table of collection %d no longer exists", collection_id)));

    char *sql = psprintf("DELETE FROM %s WHERE %s OPERATOR(pg_catalog.<) $1", qualified, quote_identifier(ttl_column));

    AsOwner as_owner;
    as_owner_begin(owner, &as_owner);

    bool saved_active = sweep_active;
    int32 saved_collection = sweep_collection;
    sweep_active = true;
    sweep_collection = collection_id;
    Oid deltypes[1] = {TIMESTAMPTZOID};
    Datum delargs[1] = {TimestampTzGetDatum(as_of)};
    volatile int64 deleted = 0;
    PG_TRY();
    {
        rc = SPI_execute_with_args(sql, 1, deltypes, delargs, NULL, false, 0);
        if (rc != SPI_OK_DELETE) elog(ERROR, "changefeed: TTL delete of %s failed (SPI %d)", qualified, rc);
        deleted = (int64)SPI_processed;
    }
    PG_FINALLY();
    {
        sweep_active = saved_active;
        sweep_collection = saved_collection;
    }
    PG_END_TRY();

    as_owner_end(&as_owner);
    SPI_finish();
    PG_RETURN_INT64(deleted);
}
