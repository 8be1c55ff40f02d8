// One row of changefeed.log as capture produces it.  Datum 0 means null.
#pragma once
#include "pg.hpp"

struct LogRow {
    int32 collection_id;
    int32 range_id;
    Datum doc_id;         // text
    Datum partition_key;  // text
    char op;              // c create, r replace, m replace to another tenant, d delete, t clear, s schema change,
                          // x where a replace that changed the partition key left (its old range)
    Datum current;        // jsonb
    Datum previous;       // jsonb
    bool ttl_expired;
    Datum tenant;                  // text
    Datum previous_tenant;         // text: the tenant before a move (op m)
    int32 schema_version;          // the table's shape the images were written under (0: null)
    Datum previous_partition_key;  // text: a replace that changed the partition key, the key before
};

// Inserts the row into today's (UTC) partition of changefeed.log, in the
// current (sub)transaction.
void changefeed_log_write(const LogRow *row);
