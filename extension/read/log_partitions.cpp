// The log's partitions for a read (log_partitions.hpp): found through the
// catalog, each checked for the columns and the index the scans need.
#include "pg.hpp"
#include "read/log_partitions.hpp"

extern "C" {
#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/xid8.h"
}

namespace changefeed::read {

namespace {

const char *const kColumnNames[kColumns] = {
    "seq",           "txid",   "collection_id",   "range_id",       "doc_id",
    "partition_key", "op",     "current",         "previous",       "ttl_expired",
    "written_at",    "tenant", "previous_tenant", "schema_version", "previous_partition_key"};

}  // namespace

Partition *open_partitions(int *count, List **locked) {
    Oid ns = get_namespace_oid("changefeed", false);
    Oid log = get_relname_relid("log", ns);
    if (!OidIsValid(log)) ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("changefeed.log is missing")));
    List *all = find_all_inheritors(log, AccessShareLock, NULL);
    if (locked != NULL) *locked = list_delete_first(list_copy(all));  // the log itself is not locked here
    Partition *parts = (Partition *)palloc0(sizeof(Partition) * list_length(all));
    int n = 0;
    ListCell *lc;
    foreach (lc, all) {
        Oid relid = lfirst_oid(lc);
        Relation heap = table_open(relid, NoLock);  // locked by find_all_inheritors
        // An empty partition (the days ahead) holds no row our snapshot can
        // see: such a row was inserted, extending the file, before the
        // snapshot was taken, and this check comes after.
        if (heap->rd_rel->relkind == RELKIND_PARTITIONED_TABLE || RelationGetNumberOfBlocks(heap) == 0) {
            table_close(heap, NoLock);
            continue;
        }
        Partition *p = &parts[n];
        p->heap = heap;
        for (int c = 0; c < kColumns; c++) {
            p->att[c] = get_attnum(relid, kColumnNames[c]);
            // A log of release 0.2 (before ALTER EXTENSION UPDATE) has no
            // previous_tenant, and no tenant move (op 'm') either, and no
            // schema versions.
            if (p->att[c] == InvalidAttrNumber && c != kPreviousTenant && c != kSchemaVersion &&
                c != kPreviousPartitionKey)
                ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                                errmsg("changefeed.log partition \"%s\" has no column \"%s\"",
                                       RelationGetRelationName(heap), kColumnNames[c])));
        }
        List *indexes = RelationGetIndexList(heap);
        ListCell *ic;
        foreach (ic, indexes) {
            Relation index = index_open(lfirst_oid(ic), AccessShareLock);
            Form_pg_index ix = index->rd_index;
            if (p->index == NULL && index->rd_rel->relam == BTREE_AM_OID && ix->indisvalid && ix->indnkeyatts >= 3 &&
                ix->indkey.values[0] == p->att[kCollection] && ix->indkey.values[1] == p->att[kRange] &&
                ix->indkey.values[2] == p->att[kTxid] &&
                heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) &&
                heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL)) {
                p->index = index;
                // A partition attached from elsewhere may have the index of release 0.2.
                p->by_seq = ix->indnkeyatts >= 4 && ix->indkey.values[3] == p->att[kSeq];
            } else
                index_close(index, AccessShareLock);
        }
        if (p->index == NULL)
            ereport(ERROR, (errcode(ERRCODE_UNDEFINED_OBJECT),
                            errmsg("changefeed.log partition \"%s\" has no index on (collection_id, range_id, txid)",
                                   RelationGetRelationName(heap)),
                            errhint("Reinstall the extension, or recreate the partition with CREATE TABLE ... "
                                    "PARTITION OF changefeed.log.")));
        n++;
    }
    *count = n;
    return parts;
}

void close_partitions(Partition *parts, int n) {
    for (int i = 0; i < n; i++) {
        index_close(parts[i].index, AccessShareLock);
        table_close(parts[i].heap, NoLock);
    }
}

void unlock_partitions(List *locked) {
    ListCell *lc;
    foreach (lc, locked) UnlockRelationOid(lfirst_oid(lc), AccessShareLock);
}

int scan_keys(ScanKeyData *keys, int32 collection, int32 range, FullTransactionId from, FullTransactionId to,
              int64 after) {
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(collection));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(range));
    int n;
    if (!FullTransactionIdIsValid(to)) {
        ScanKeyInit(&keys[2], 3, BTEqualStrategyNumber, F_XID8EQ, FullTransactionIdGetDatum(from));
        n = 3;
    } else {
        ScanKeyInit(&keys[2], 3, BTGreaterEqualStrategyNumber, F_XID8GE, FullTransactionIdGetDatum(from));
        ScanKeyInit(&keys[3], 3, BTLessStrategyNumber, F_XID8LT, FullTransactionIdGetDatum(to));
        n = 4;
    }
    if (after > 0) ScanKeyInit(&keys[n++], 4, BTGreaterStrategyNumber, F_INT8GT, Int64GetDatum(after));
    return n;
}

}  // namespace changefeed::read
