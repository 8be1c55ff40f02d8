// Writes change rows straight into the day's partition of changefeed.log.
//
// Capture is the hottest path we own, so it does not go through SPI and the
// executor: it forms the tuple, inserts it into the partition for the
// transaction's start day (UTC) and inserts the index entries, the way
// catalog updates do.  Bypassing the executor also means writers need no
// privilege on changefeed.log.  Partition lookups are cached per backend and
// dropped on any relcache invalidation of the log.  The partition, its
// indexes and their IndexInfo stay open from the first row a
// (sub)transaction writes until it ends (a bulk statement writes all its rows
// through one open): see OpenPartition.
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
#include "tcop/utility.h"
#include "utils/resowner.h"
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

// The partition rows are being written to, opened (locked, with its indexes
// and their IndexInfo) by the (sub)transaction `owner_subid` under its
// resource owner and kept open until that subtransaction ends: closed at its
// commit (before its resource owner would report the references as leaked)
// or at the top-level pre-commit/prepare, forgotten at its abort (the
// resource owner releases them then).  A nested subtransaction uses it as
// is: the references and the lock belong to an enclosing one that outlives
// it.  A relcache invalidation that touches the log marks it stale; it is
// reopened at the next row, never closed inside the callback.  Memory lives
// in TopTransactionContext.
struct OpenPartition {
    bool valid;
    bool stale;
    SubTransactionId owner_subid;
    ResourceOwner owner;  // owner_subid's: references are forgotten from the owner that holds them
    Relation rel;
    CatalogIndexState indexes;
    TupleTableSlot *slot;
    bool before_0_3;
};
OpenPartition open_part = {};

void invalidate(Datum, Oid relid) {
    // Partitions come and go with maintain(); any change to one of ours resets.
    bool ours = open_part.valid && relid == RelationGetRelid(open_part.rel);
    if (ours || !cache.valid || relid == InvalidOid || relid == cache.log_oid || relid == cache.part_oid ||
        relid == cache.default_oid) {
        cache.valid = false;
        if (open_part.valid) open_part.stale = true;
    }
}

void close_open_partition(void) {
    if (!open_part.valid) return;
    open_part.valid = false;
    ResourceOwner saved_owner = CurrentResourceOwner;
    CurrentResourceOwner = open_part.owner;
    ExecDropSingleTupleTableSlot(open_part.slot);
    CatalogCloseIndexes(open_part.indexes);
    table_close(open_part.rel, NoLock);
    CurrentResourceOwner = saved_owner;
}

void forget_open_partition(void) { open_part.valid = false; }

// Utility commands (ALTER, DROP, TRUNCATE, REINDEX of the log, maintain()'s
// partition DDL) refuse a relation this session holds open, so none runs
// while the partition is: it is closed first and reopened by the next row.
ProcessUtility_hook_type prev_process_utility = NULL;

void process_utility(PlannedStmt *pstmt, const char *query, bool read_only_tree,
                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *env,
                     DestReceiver *dest, QueryCompletion *qc) {
    close_open_partition();
    if (prev_process_utility)
        prev_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
}

void on_xact(XactEvent event, void *) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
            close_open_partition();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            forget_open_partition();
            break;
    }
}

void on_subxact(SubXactEvent event, SubTransactionId subid, SubTransactionId, void *) {
    if (!open_part.valid || subid != open_part.owner_subid) return;
    if (event == SUBXACT_EVENT_COMMIT_SUB)
        close_open_partition();
    else if (event == SUBXACT_EVENT_ABORT_SUB)
        forget_open_partition();
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
        RegisterXactCallback(on_xact, NULL);
        RegisterSubXactCallback(on_subxact, NULL);
        prev_process_utility = ProcessUtility_hook;
        ProcessUtility_hook = process_utility;
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

void insert_index_entries(HeapTuple tuple) {
    Relation rel = open_part.rel;
    CatalogIndexState indexes = open_part.indexes;
    TupleTableSlot *slot = open_part.slot;
    ExecStoreHeapTuple(tuple, slot, false);
    for (int i = 0; i < indexes->ri_NumIndices; i++) {
        IndexInfo *info = indexes->ri_IndexRelationInfo[i];
        Relation index = indexes->ri_IndexRelationDescs[i];
        if (!info->ii_ReadyForInserts) continue;
        Datum values[INDEX_MAX_KEYS];
        bool isnull[INDEX_MAX_KEYS];
        FormIndexDatum(info, slot, NULL, values, isnull);
        index_insert(index, values, isnull, &tuple->t_self, rel,
                     index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, false, info);
    }
    ExecClearTuple(slot);
}

// Makes open_part the partition for rows written at `ts`, opened and checked.
void use_partition(TimestampTz ts) {
    if (open_part.valid && !open_part.stale) return;
    close_open_partition();
    if (!cache.valid) load_cache();
    // Opened under the (sub)transaction's resource owner, not the portal's:
    // the references outlive the statement.
    ResourceOwner saved_owner = CurrentResourceOwner;
    MemoryContext saved_cxt = MemoryContextSwitchTo(TopTransactionContext);
    CurrentResourceOwner = CurTransactionResourceOwner;
    Relation rel = open_partition(ts);
    TupleDesc desc = RelationGetDescr(rel);
    // A log of release 0.2 (the library is updated before ALTER EXTENSION
    // UPDATE) has no previous_tenant: a tenant move is logged as a replace
    // there, as 0.2 did.
    bool before_0_3 = desc->natts == kColumns - 1;
    if (desc->natts != kColumns && !before_0_3)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("changefeed.log partition \"%s\" has %d columns, expected %d",
                               RelationGetRelationName(rel), desc->natts, kColumns)));
    CatalogIndexState indexes = CatalogOpenIndexes(rel);
    for (int i = 0; i < indexes->ri_NumIndices; i++) {
        IndexInfo *info = indexes->ri_IndexRelationInfo[i];
        if (info->ii_Expressions != NIL || info->ii_Predicate != NIL)
            ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                            errmsg("index \"%s\" on the change log has expressions or a predicate",
                                   RelationGetRelationName(indexes->ri_IndexRelationDescs[i])),
                            errhint("Indexes on changefeed.log must be plain column indexes.")));
    }
    open_part.slot = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
    open_part.rel = rel;
    open_part.indexes = indexes;
    open_part.before_0_3 = before_0_3;
    open_part.owner_subid = GetCurrentSubTransactionId();
    open_part.owner = CurTransactionResourceOwner;
    open_part.stale = false;
    open_part.valid = true;
    CurrentResourceOwner = saved_owner;
    MemoryContextSwitchTo(saved_cxt);
}

}  // namespace

void changefeed_log_write(const LogRow *row) {
    if (!cache.valid) load_cache();
    TimestampTz written_at = GetCurrentTransactionStartTimestamp();
    use_partition(written_at);
    Relation rel = open_part.rel;
    TupleDesc desc = RelationGetDescr(rel);
    bool before_0_3 = open_part.before_0_3;

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
    insert_index_entries(tuple);
    heap_freetuple(tuple);
}
