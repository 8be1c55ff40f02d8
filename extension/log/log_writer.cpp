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
// through one open): see OpenPartition.  A statement's rows are formed (seq
// and all) as its triggers fire and inserted in batches with
// heap_multi_insert, before anything can look at the log: see PendingRows.
#include "pg.hpp"
#include "log/log_writer.hpp"

extern "C" {
#include "access/genam.h"
#include "access/heapam.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "tcop/utility.h"
#include "utils/datetime.h"
#include "utils/inval.h"
#include "utils/resowner.h"
#include "utils/xid8.h"
}

namespace {

constexpr int kColumns = 15;  // changefeed.log's columns, in order

struct Cache {
    bool valid;
    Oid namespace_oid;
    Oid log_oid;
    Oid seq_oid;
    Oid default_oid;
    int64 day;  // UTC day number of part_oid
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
    TupleDesc slot_desc;  // a copy of the partition's, not reference counted: pending rows' slots are never dropped
    bool before_0_3;
};
OpenPartition open_part = {};

// Rows formed and not inserted yet.  One heap_multi_insert writes a page's
// worth of tuples in one WAL record where heap_insert writes one per tuple.
// Rows wait only while nothing can read the log: they are inserted when the
// statement's executor finishes (after its AFTER triggers fired), before any
// other query starts, around utility commands (COPY, TRUNCATE), when a
// (sub)transaction pre-commits or prepares, and when a batch is full.  Only
// the (sub)transaction that formed them may insert them: the tuples take its
// xid, so that a rollback to a savepoint takes exactly its rows away.  A
// subtransaction begun while rows wait (by another trigger, between two rows
// of a statement) writes its own rows at once; the waiting ones are inserted
// when control is back in their (sub)transaction, or dropped with it (a query
// inside that subtransaction does not see them yet).  Each
// keeps the command id it was formed in, so it is visible to exactly the
// commands it would have been inserted in front of.
constexpr int kBatchRows = 1000;
constexpr Size kBatchBytes = 1024 * 1024;

struct PendingRows {
    int count;
    Size bytes;
    SubTransactionId subid;
    CommandId cid;
    MemoryContext cxt;  // the tuples; a child of TopTransactionContext
    int nslots;         // slots made so far (TopTransactionContext)
    TupleTableSlot *slots[kBatchRows];
};
PendingRows pending = {};

// From the transaction's pre-commit (or pre-prepare) on, rows go in as they
// are formed: nothing would insert rows formed after our callback ran (a
// capture trigger fired by another extension's pre-commit callback).
bool committing = false;

bool pending_insertable(void) {
    return pending.count > 0 && pending.subid == GetCurrentSubTransactionId();
}

void drop_pending(void) {
    pending.count = 0;
    pending.bytes = 0;
    if (pending.cxt != NULL) MemoryContextReset(pending.cxt);
}

// At transaction end: TopTransactionContext, and with it the tuples and the
// slots, is gone.
void forget_pending(void) {
    pending.count = 0;
    pending.bytes = 0;
    pending.cxt = NULL;
    pending.nslots = 0;
}

void insert_pending(void);

// The slots of pending rows and the descriptor they share, given back when
// the partition they were made for is closed.
void free_pending_slots(void) {
    for (int i = 0; i < pending.nslots; i++) ExecDropSingleTupleTableSlot(pending.slots[i]);
    pending.nslots = 0;
    if (open_part.slot_desc != NULL) FreeTupleDesc(open_part.slot_desc);
    open_part.slot_desc = NULL;
}

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
    if (pending_insertable()) insert_pending();
    // Rows of an enclosing (sub)transaction still wait for this partition:
    // it stays open until they are in (a DDL on it is refused meanwhile).
    if (pending.count > 0) return;
    open_part.valid = false;
    free_pending_slots();
    ResourceOwner saved_owner = CurrentResourceOwner;
    CurrentResourceOwner = open_part.owner;
    ExecDropSingleTupleTableSlot(open_part.slot);
    CatalogCloseIndexes(open_part.indexes);
    table_close(open_part.rel, NoLock);
    CurrentResourceOwner = saved_owner;
}

// At an abort: the resource owner releases the references.  A
// subtransaction's abort leaves TopTransactionContext, so the pending slots
// are given back; a transaction's takes the context with them.
void forget_open_partition(bool subtransaction) {
    open_part.valid = false;
    if (subtransaction)
        free_pending_slots();
    else
        open_part.slot_desc = NULL;
}

// Utility commands (ALTER, DROP, TRUNCATE, REINDEX of the log, maintain()'s
// partition DDL) refuse a relation this session holds open, so none runs
// while the partition is: it is closed first and reopened by the next row.
ProcessUtility_hook_type prev_process_utility = NULL;

void process_utility(PlannedStmt *pstmt, const char *query, bool read_only_tree, ProcessUtilityContext context,
                     ParamListInfo params, QueryEnvironment *env, DestReceiver *dest, QueryCompletion *qc) {
    close_open_partition();
    if (prev_process_utility)
        prev_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    // COPY and TRUNCATE fire their triggers inside the utility.
    if (pending_insertable()) insert_pending();
}

// A query may read the log (another trigger, a check in the same
// transaction): the rows formed so far go in before it starts.
ExecutorStart_hook_type prev_executor_start = NULL;
ExecutorFinish_hook_type prev_executor_finish = NULL;

void executor_start(QueryDesc *query, int eflags) {
    if (pending_insertable()) insert_pending();
    if (prev_executor_start)
        prev_executor_start(query, eflags);
    else
        standard_ExecutorStart(query, eflags);
}

// A statement's AFTER triggers fire in its ExecutorFinish: its rows are all
// formed once it returns.
void executor_finish(QueryDesc *query) {
    if (prev_executor_finish)
        prev_executor_finish(query);
    else
        standard_ExecutorFinish(query);
    if (pending_insertable()) insert_pending();
}

void on_xact(XactEvent event, void *) {
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
        case XACT_EVENT_PRE_PREPARE:
            if (pending_insertable()) insert_pending();
            // Every subtransaction has ended by now, each inserting its rows
            // or taking them away: rows left would be lost, so the
            // transaction fails instead.
            if (pending.count > 0)
                ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                                errmsg("changefeed: %d change rows of a subtransaction were not written to the log",
                                       pending.count)));
            close_open_partition();
            committing = true;
            break;
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
        case XACT_EVENT_PREPARE:
            close_open_partition();
            // Rows formed after pre-commit went in at once; none can wait.
            if (pending.count > 0)
                elog(WARNING, "changefeed: %d change rows formed after pre-commit were not written", pending.count);
            forget_pending();
            committing = false;
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
            forget_open_partition(false);
            forget_pending();
            committing = false;
            break;
    }
}

void on_subxact(SubXactEvent event, SubTransactionId subid, SubTransactionId, void *) {
    if (pending.count > 0 && subid == pending.subid) {
        if (event == SUBXACT_EVENT_PRE_COMMIT_SUB)
            insert_pending();
        else if (event == SUBXACT_EVENT_ABORT_SUB)
            drop_pending();
    }
    if (!open_part.valid || subid != open_part.owner_subid) return;
    if (event == SUBXACT_EVENT_COMMIT_SUB)
        close_open_partition();
    else if (event == SUBXACT_EVENT_ABORT_SUB)
        forget_open_partition(true);
}

Oid must_find(const char *name, Oid ns) {
    Oid oid = get_relname_relid(name, ns);
    if (!OidIsValid(oid))
        ereport(ERROR,
                (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("changefeed.%s is missing", name),
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
        prev_executor_start = ExecutorStart_hook;
        ExecutorStart_hook = executor_start;
        prev_executor_finish = ExecutorFinish_hook;
        ExecutorFinish_hook = executor_finish;
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

// The index entries of a row the slot holds, inserted at slot->tts_tid.
void insert_index_entries(TupleTableSlot *slot) {
    Relation rel = open_part.rel;
    CatalogIndexState indexes = open_part.indexes;
    for (int i = 0; i < indexes->ri_NumIndices; i++) {
        IndexInfo *info = indexes->ri_IndexRelationInfo[i];
        Relation index = indexes->ri_IndexRelationDescs[i];
        if (!info->ii_ReadyForInserts) continue;
        Datum values[INDEX_MAX_KEYS];
        bool isnull[INDEX_MAX_KEYS];
        FormIndexDatum(info, slot, NULL, values, isnull);
        index_insert(index, values, isnull, &slot->tts_tid, rel,
                     index->rd_index->indisunique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, false, info);
    }
}

// Inserts the one row the slot holds, and its index entries.
void insert_row(TupleTableSlot *slot, CommandId cid) {
    HeapTuple tuple = ExecFetchSlotHeapTuple(slot, false, NULL);
    heap_insert(open_part.rel, tuple, cid, 0, NULL);
    slot->tts_tid = tuple->t_self;
    insert_index_entries(slot);
}

// Inserts the waiting rows, heap first, then their index entries, in the
// (sub)transaction that formed them.
void insert_pending(void) {
    int n = pending.count;
    MemoryContext old = MemoryContextSwitchTo(pending.cxt);
    if (n == 1) {
        insert_row(pending.slots[0], pending.cid);
    } else {
        heap_multi_insert(open_part.rel, pending.slots, n, pending.cid, 0, NULL);
        for (int i = 0; i < n; i++) insert_index_entries(pending.slots[i]);
    }
    for (int i = 0; i < n; i++) ExecClearTuple(pending.slots[i]);
    MemoryContextSwitchTo(old);
    drop_pending();
}

// Makes open_part the partition for rows written at `ts`, opened and checked.
void use_partition(TimestampTz ts) {
    if (open_part.valid && !open_part.stale) return;
    // Rows of an enclosing (sub)transaction wait for the open partition: it
    // serves as it is until they are in.
    if (open_part.valid && pending.count > 0 && !pending_insertable()) return;
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
    // UPDATE) has no previous_tenant, schema_version nor
    // previous_partition_key: a tenant move is logged as a replace there, as
    // 0.2 did.
    bool before_0_3 = desc->natts == kColumns - 3;
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
    open_part.slot_desc = CreateTupleDescCopy(desc);
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

// Images from this size on are stored compressed in the row (as the toaster
// would compress a large one in place), when that makes them smaller: most of
// a change's bytes and WAL are its images, and the log's rows are kept whole
// (toast_tuple_target), so nothing else compresses them.  Smaller images
// rarely gain what the attempt costs.
constexpr Size kCompressFromBytes = 128;

// The method the column asks for (ALTER TABLE changefeed.log ALTER COLUMN
// current SET COMPRESSION ...), else lz4 where the server has it: it costs a
// fraction of pglz's time, and gives up at once on data that does not shrink.
char compression_method(TupleDesc desc, int column) {
    char method = TupleDescAttr(desc, column)->attcompression;
    if (CompressionMethodIsValid(method)) return method;
#ifdef USE_LZ4
    return TOAST_LZ4_COMPRESSION;
#else
    return TOAST_PGLZ_COMPRESSION;
#endif
}

// The image to store: compressed when large enough and it shrinks, else as
// given.  Every reader detoasts, so what reads return is unchanged.
Datum compact_image(Datum image, TupleDesc desc, int column) {
    if (image == (Datum)0) return image;
    struct varlena *v = (struct varlena *)DatumGetPointer(image);
    if (!VARATT_IS_4B_U(v) || VARSIZE(v) < kCompressFromBytes) return image;
    Datum compressed = toast_compress_datum(image, compression_method(desc, column));
    return compressed != (Datum)0 ? compressed : image;
}

}  // namespace

void changefeed_log_write(const LogRow *row) {
    if (!cache.valid) load_cache();
    TimestampTz written_at = GetCurrentTransactionStartTimestamp();
    use_partition(written_at);
    Relation rel = open_part.rel;
    TupleDesc desc = RelationGetDescr(rel);
    bool before_0_3 = open_part.before_0_3;
    if (before_0_3 && row->op == 'x') return;  // a 0.2 log has no such rows (nor their reader)

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
    values[7] = compact_image(row->current, desc, 7);
    nulls[7] = row->current == (Datum)0;
    values[8] = compact_image(row->previous, desc, 8);
    nulls[8] = row->previous == (Datum)0;
    values[9] = BoolGetDatum(row->ttl_expired);
    values[10] = TimestampTzGetDatum(written_at);
    values[11] = row->tenant;
    nulls[11] = row->tenant == (Datum)0;
    if (!before_0_3) {
        values[12] = row->previous_tenant;
        nulls[12] = row->previous_tenant == (Datum)0;
        values[13] = Int32GetDatum(row->schema_version);
        nulls[13] = row->schema_version == 0;
        values[14] = row->previous_partition_key;
        nulls[14] = row->previous_partition_key == (Datum)0;
    }

    CommandId cid = GetCurrentCommandId(true);
    SubTransactionId subid = GetCurrentSubTransactionId();
    // Rows of an enclosing (sub)transaction wait, or the transaction is
    // committing: this one goes in now.
    if (committing || (pending.count > 0 && pending.subid != subid)) {
        ExecStoreHeapTuple(heap_form_tuple(desc, values, nulls), open_part.slot, true);
        insert_row(open_part.slot, cid);
        ExecClearTuple(open_part.slot);
        return;
    }
    if (pending.count > 0 && pending.cid != cid) insert_pending();
    if (pending.cxt == NULL)
        pending.cxt = AllocSetContextCreate(TopTransactionContext, "changefeed pending log rows",
                                            ALLOCSET_DEFAULT_SIZES);
    if (pending.count == pending.nslots) {
        MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
        pending.slots[pending.nslots++] = MakeTupleTableSlot(open_part.slot_desc, &TTSOpsHeapTuple);
        MemoryContextSwitchTo(old);
    }
    MemoryContext old = MemoryContextSwitchTo(pending.cxt);
    HeapTuple tuple = heap_form_tuple(desc, values, nulls);
    MemoryContextSwitchTo(old);
    ExecStoreHeapTuple(tuple, pending.slots[pending.count], false);
    pending.subid = subid;
    pending.cid = cid;
    pending.count++;
    pending.bytes += tuple->t_len;
    if (pending.count == kBatchRows || pending.bytes >= kBatchBytes) insert_pending();
}
