// Schema versions on the capture side: which version of its table's shape a
// captured row is written under, and the schema change rows of the feed.
//
// The version is looked up once per collection and backend and kept until
// the next relation cache invalidation of any table: the DDL that makes a new
// version (capture/schema.sql, called by the guard at ddl_command_end) invalidates
// its table, and every writer of the table processes that invalidation when
// it locks the table, before its trigger fires.  The lookup reads the latest
// committed version, not the writer's snapshot: a REPEATABLE READ writer
// whose snapshot predates the DDL still writes rows of the table's new shape.
#include "pg.hpp"
#include "capture/schema_versions.hpp"
#include "capture/xact_tracking.hpp"
#include "log/log_writer.hpp"

extern "C" {
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/snapmgr.h"
}

namespace {

constexpr int kCached = 64;

struct Cached {
    int32 collection_id;
    int32 version;
};

Cached cached[kCached];
int ncached = 0;
bool callback_registered = false;

void forget_all(Datum, Oid) {
    ncached = 0;
}

// A collection's table never changes (ids are not reused): kept until the
// backend ends, not dropped at invalidations.
struct CachedTable {
    int32 collection_id;
    Oid table;
};

CachedTable tables[kCached];
int ntables = 0;

void remember_table(int32 collection_id, Oid table) {
    for (int i = 0; i < ntables; i++)
        if (tables[i].collection_id == collection_id) return;
    if (ntables == kCached) ntables = 0;
    tables[ntables++] = CachedTable{collection_id, table};
}

// Read directly, as the catalog it is: the writer may not read the table.
// Also notes the collection's table, when there is one.
int32 lookup(int32 collection_id, bool *known) {
    *known = true;
    Oid ns = get_namespace_oid("changefeed", false);
    Oid relid = get_relname_relid("collection", ns);
    if (!OidIsValid(relid)) return 0;
    AttrNumber id_att = get_attnum(relid, "id");
    AttrNumber relid_att = get_attnum(relid, "relid");
    AttrNumber version_att = get_attnum(relid, "schema_version");  // none before the update to 0.3
    if (id_att == InvalidAttrNumber || relid_att == InvalidAttrNumber) return 0;
    // Never wait on it: a writer must not queue behind a lock on the catalog
    // (an admin's LOCK TABLE, a VACUUM FULL).  Then the row goes in without a
    // version, read as the version in force at its seq (schema_version.since_seq).
    if (!ConditionalLockRelationOid(relid, AccessShareLock)) {
        *known = false;
        return 0;
    }
    Relation rel = table_open(relid, NoLock);
    ScanKeyData key;
    ScanKeyInit(&key, id_att, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(collection_id));
    SysScanDesc scan = systable_beginscan(rel, InvalidOid, false, GetLatestSnapshot(), 1, &key);
    int32 version = 0;
    HeapTuple tuple = systable_getnext(scan);
    if (HeapTupleIsValid(tuple)) {
        bool isnull;
        Datum d = heap_getattr(tuple, relid_att, RelationGetDescr(rel), &isnull);
        if (!isnull) remember_table(collection_id, DatumGetObjectId(d));
        if (version_att != InvalidAttrNumber) {
            d = heap_getattr(tuple, version_att, RelationGetDescr(rel), &isnull);
            if (!isnull) version = DatumGetInt32(d);
        }
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return version;
}

}  // namespace

int32 changefeed_schema_version(int32 collection_id) {
    for (int i = 0; i < ncached; i++)
        if (cached[i].collection_id == collection_id) return cached[i].version;
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(forget_all, (Datum)0);
        callback_registered = true;
    }
    bool known;
    int32 version = lookup(collection_id, &known);
    if (!known) return version;  // asked again by the next statement
    if (ncached == kCached) ncached = 0;
    cached[ncached++] = Cached{collection_id, version};
    return version;
}

Oid changefeed_collection_table(int32 collection_id, bool *known) {
    for (int i = 0; i < ntables; i++)
        if (tables[i].collection_id == collection_id) {
            *known = true;
            return tables[i].table;
        }
    (void)lookup(collection_id, known);
    for (int i = 0; i < ntables; i++)
        if (tables[i].collection_id == collection_id) return tables[i].table;
    return InvalidOid;
}

extern "C" {

PG_FUNCTION_INFO_V1(changefeed_log_schema_change);

// log_schema_change(collection_id, relid, ranges, version, change): one row
// of operation 's' per range, so every range's consumer gets it in order with
// the range's data; every backend drops its cached version.
Datum changefeed_log_schema_change(PG_FUNCTION_ARGS) {
    int32 collection_id = PG_GETARG_INT32(0);
    Oid relid = PG_GETARG_OID(1);
    int32 ranges = PG_GETARG_INT32(2);
    int32 version = PG_GETARG_INT32(3);
    Datum change = PG_GETARG_DATUM(4);
    for (int32 range = 0; range < ranges; range++) {
        LogRow row = {};
        row.collection_id = collection_id;
        row.range_id = range;
        row.op = 's';
        row.current = change;
        row.schema_version = version;
        changefeed_log_write(&row);
    }
    CacheInvalidateRelcacheByRelid(relid);
    changefeed_note_capture(collection_id);
    PG_RETURN_VOID();
}

}  // extern "C"
