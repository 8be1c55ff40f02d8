// The partitions of changefeed.log as a read scans them (log_partitions.cpp).
// In: the log as the catalog has it.  Out: every partition that may hold a
// row the read can see, open and locked as a query would lock it, with its
// read index (a btree on collection_id, range_id, txid, seq) and the numbers
// of its columns; and the keys of one lookup in that index.
#pragma once
#include "pg.hpp"

extern "C" {
#include "access/skey.h"
#include "access/transam.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"
}

// The pieces of a read (extension/read/read_window.cpp) share their types in
// this namespace: generic names (Partition, Row, Window) stay out of the
// library's global one.
namespace changefeed::read {

// changefeed.log's columns, by name: a partition attached from elsewhere may
// number them differently.
enum Column {
    kSeq,
    kTxid,
    kCollection,
    kRange,
    kDocId,
    kPartitionKey,
    kOp,
    kCurrent,
    kPrevious,
    kTtl,
    kWrittenAt,
    kTenant,
    kPreviousTenant,
    kSchemaVersion,
    kPreviousPartitionKey,
    kColumns
};

struct Partition {
    Relation heap;
    Relation index;  // btree on (collection_id, range_id, txid[, seq])
    bool by_seq;     // the index has seq after txid: a transaction's rows come in seq order
    AttrNumber att[kColumns];
};

// The partitions of changefeed.log with their read index, locked like a query would.
// `locked` (if given): the relations locked here, for unlock_partitions().
Partition *open_partitions(int *count, List **locked = NULL);

void close_partitions(Partition *parts, int n);

// Gives back the locks open_partitions() took (what this transaction held
// before stays held: a lock is counted per acquisition).
void unlock_partitions(List *locked);

// Scan keys of one index lookup: collection and range equal, txid in [from, to)
// or, with `to` invalid, equal to `from`; with `after` > 0 (an index by_seq),
// seq after it too.
int scan_keys(ScanKeyData *keys, int32 collection, int32 range, FullTransactionId from, FullTransactionId to,
              int64 after = 0);

}  // namespace changefeed::read
