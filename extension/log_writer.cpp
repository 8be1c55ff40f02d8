// Writes change rows straight into the day's partition of changefeed.log.
//
// Capture is the hottest path we own, so it does not go through SPI and the
// executor: it forms the tuple, inserts it into the partition for the
// transaction's start day (UTC) and inserts the index entries, the way
// catalog updates do.  Bypassing the executor also means writers need no
// privilege on changefeed.log.  Partition lookups are cached per backend and
// dropped on any relcache invalidation of the log.
#include "pg.hpp"
#include "log_writer.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "executor/tuptable.h"
#include "utils/datetime.h"
#include "utils/inval.h"
#include "utils/xid8.h"
}

namespace {

constexpr int kColumns = 13;  // changefeed.log's columns, in order

struct Cache {
    bool valid;
    Oid namespace_oid;
    Oid log_oid;
    Oid seq_oid;
    Oid default_oid;
    int64 day;         // UTC day number of part_oid
    Oid part_oid;
};
Cache cache = {};
bool callback_registered = false;

void invalidate(Datum, Oid relid) {
    // Partitions come and go with maintain(); any change to one of ours resets.
    if (!cache.valid || relid == InvalidOid || relid == cache.log_oid || relid == cache.part_oid ||
        relid == cache.default_oid)
        cache.valid = false;
}

Oid must_find(const char *name, Oid ns) {
    Oid oid = get_relname_relid(name, ns);
    if (!OidIsValid(oid))
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("changefeed.%s is missing", name),
                        errhint("Reinstall the extension: DROP EXTENSION changefeed CASCADE; CREATE EXTENSION changefeed;")));
    return oid;
}

void load_cache(void) {
    if (!callback_registered) {
        CacheRegisterRelcacheCallback(invalidate, (Datum)0);
        callback_registered = true;
    }
    Oid ns = get_namespace_oid("changefeed", false);
    cache.namespace_oid = ns;
    cache.log_oid = must_find("log", ns);
    cache.seq_oid = must_find("log_seq", ns);
    cache.default_oid = must_find("log_default", ns);
    cache.day = -1;
    cache.part_oid = InvalidOid;
    cache.valid = true;
}

int64 utc_day(TimestampTz ts) {
    return ts >= 0 ? ts / USECS_PER_DAY : (ts - USECS_PER_DAY + 1) / USECS_PER_DAY;
}

// The day's partition log_YYYYMMDD by name, or InvalidOid.
Oid day_partition(int64 day) {
    int y, m, d;
    j2date((int)(day + POSTGRES_EPOCH_JDATE), &y, &m, &d);
    char name[NAMEDATALEN];
    snprintf(name, sizeof name, "log_%04d%02d%02d", y, m, d);
    return get_relname_relid(name, cache.namespace_oid);
}

// The partition holding rows written at `ts`: log_YYYYMMDD (UTC day), else the default one.
Oid partition_for(TimestampTz ts) {
    int64 day = utc_day(ts);
    if (day == cache.day && OidIsValid(cache.part_oid)) return cache.part_oid;
    Oid part = day_partition(day);
    cache.day = day;
    cache.part_oid = OidIsValid(part) ? part : cache.default_oid;
    return cache.part_oid;
}

// Opens the partition for rows written at `ts`, locked.  The cached choice
// was made before the lock, and the lock is what delivers the invalidation of
// a partition another session just created: creating a partition while a
// default one exists locks the default partition, so once the default is
// locked, the day's partition is looked up again by name (a catalog lookup on
// this rare path only).
Relation open_partition(TimestampTz ts) {
    Oid part = partition_for(ts);
    Relation rel = table_open(part, RowExclusiveLock);
    if (part == cache.default_oid) {
        Oid day_part = day_partition(utc_day(ts));
        if (OidIsValid(day_part)) {
            table_close(rel, NoLock);
            rel = table_open(day_part, RowExclusiveLock);
            if (cache.valid) {
                cache.day = utc_day(ts);
                cache.part_oid = day_part;
            }
        }
    }
    return rel;
}

void insert_index_entries(Relation rel, HeapTuple tuple) {
    CatalogIndexState indexes = CatalogOpenIndexes(rel);
    TupleTableSlot *slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
    ExecStoreHeapTuple(tuple, slot, false);
    for (int i = 0; i < indexes->ri_NumIndices; i++) {
        IndexInfo *info = indexes->ri_IndexRelationInfo[i];
        Relation index = indexes->ri_IndexRelationDescs[i];
        if (!info->ii_ReadyForInserts) continue;
        if (info->ii_Expressions != NIL || info->ii_Predicate != NIL)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                            errmsg("index \"%s\" on the change log has expressions or a predicate",
                                   RelationGetRelationName(index)),
                            errhint("Indexes on changefeed.log must be plain column indexes.")));
        Datum values[INDEX_MAX_KEYS];
        bool isnull[INDEX_MAX_KEYS];
        FormIndexDatum(info, slot, NULL, values, isnull);
        index_insert(index, values, isnull, &tuple->t_self, rel,
                     index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, false, info);
    }
    ExecDropSingleTupleTableSlot(slot);
    CatalogCloseIndexes(indexes);
}

}  // namespace

void changefeed_log_write(const LogRow *row) {
    if (!cache.valid) load_cache();
    TimestampTz written_at = GetCurrentTransactionStartTimestamp();
    Relation rel = open_partition(written_at);
    TupleDesc desc = RelationGetDescr(rel);
    // A log of release 0.2 (the library is updated before ALTER EXTENSION
    // UPDATE) has no previous_tenant: a tenant move is logged as a replace
    // there, as 0.2 did.
    bool before_0_3 = desc->natts == kColumns - 1;
    if (desc->natts != kColumns && !before_0_3)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("changefeed.log partition \"%s\" has %d columns, expected %d",
                               RelationGetRelationName(rel), desc->natts, kColumns)));

    Datum values[kColumns];
    bool nulls[kColumns] = {};
    values[0] = Int64GetDatum(nextval_internal(cache.seq_oid, false));
    values[1] = FullTransactionIdGetDatum(GetTopFullTransactionId());
    values[2] = Int32GetDatum(row->collection_id);
    values[3] = Int32GetDatum(row->range_id);
    values[4] = row->doc_id;
    nulls[4] = row->doc_id == (Datum)0;
    values[5] = row->partition_key;
    nulls[5] = row->partition_key == (Datum)0;
    values[6] = CharGetDatum(before_0_3 && row->op == 'm' ? 'r' : row->op);
    values[7] = row->current;
    nulls[7] = row->current == (Datum)0;
    values[8] = row->previous;
    nulls[8] = row->previous == (Datum)0;
    values[9] = BoolGetDatum(row->ttl_expired);
    values[10] = TimestampTzGetDatum(written_at);
    values[11] = row->tenant;
    nulls[11] = row->tenant == (Datum)0;
    if (!before_0_3) {
        values[12] = row->previous_tenant;
        nulls[12] = row->previous_tenant == (Datum)0;
    }

    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    heap_insert(rel, tuple, GetCurrentCommandId(true), 0, NULL);
    insert_index_entries(rel, tuple);
    heap_freetuple(tuple);
    table_close(rel, NoLock);
}
