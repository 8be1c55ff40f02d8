// The coordinator's half of a distributed table's feed (scale_out/collect.sql):
// a change read from a worker's shard placement, appended to the coordinator's
// log under the distributed table's collection, in the collecting transaction.
// Its range, images and tenants are the placement's, whose collection has the
// same ranges and options; its position is the coordinator's.
#include "pg.hpp"
#include "capture/xact_tracking.hpp"
#include "log/log_writer.hpp"

extern "C" {

PG_FUNCTION_INFO_V1(changefeed_append_change);

// append_change(collection_id, range_id, doc_id, partition_key, op, current,
// previous, ttl_expired, tenant, previous_tenant, previous_partition_key)
Datum changefeed_append_change(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(4) || PG_ARGISNULL(7))
        ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                        errmsg("append_change(): collection, range, operation and ttl_expired must not be null")));
    LogRow row = {};
    row.collection_id = PG_GETARG_INT32(0);
    row.range_id = PG_GETARG_INT32(1);
    row.doc_id = PG_ARGISNULL(2) ? (Datum)0 : PG_GETARG_DATUM(2);
    row.partition_key = PG_ARGISNULL(3) ? (Datum)0 : PG_GETARG_DATUM(3);
    row.op = PG_GETARG_CHAR(4);
    row.current = PG_ARGISNULL(5) ? (Datum)0 : PG_GETARG_DATUM(5);
    row.previous = PG_ARGISNULL(6) ? (Datum)0 : PG_GETARG_DATUM(6);
    row.ttl_expired = PG_GETARG_BOOL(7);
    row.tenant = PG_ARGISNULL(8) ? (Datum)0 : PG_GETARG_DATUM(8);
    row.previous_tenant = PG_ARGISNULL(9) ? (Datum)0 : PG_GETARG_DATUM(9);
    row.previous_partition_key = PG_ARGISNULL(10) ? (Datum)0 : PG_GETARG_DATUM(10);
    changefeed_log_write(&row);
    // Wakes the table's readers at commit, as a captured write does.
    changefeed_note_capture(row.collection_id);
    PG_RETURN_VOID();
}

}  // extern "C"
