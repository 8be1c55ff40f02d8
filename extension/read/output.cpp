// read()'s rows (output.hpp).
#include "pg.hpp"
#include "capture/previous_patch.hpp"
#include "position/position_codec.hpp"
#include "position/position_history.hpp"
#include "position/position_key.hpp"
#include "read/output.hpp"

extern "C" {
#include "access/detoast.h"
#include "access/xlog.h"
#include "utils/rel.h"
#include "utils/xid8.h"
}

namespace changefeed::read {

char *snapshot_text(const PgSnapshot *s) {
    return DatumGetCString(DirectFunctionCall1(pg_snapshot_out, PointerGetDatum(s)));
}

text *encode_position(const char *lo, const char *hi, int64 seq, char *buf, size_t buflen) {
    char err[256];
    ChangefeedCodecStatus rc = changefeed_codec_encode(lo, hi, seq, GetSystemIdentifier(), MyDatabaseId,
                                                       changefeed_wal_point(), changefeed_position_key(), buf, buflen,
                                                       err, sizeof err);
    if (rc != CHANGEFEED_CODEC_OK)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cannot encode position: %s", err)));
    return cstring_to_text(buf);
}

namespace {

text *operation_name(char op) {
    switch (op) {
        case 'c': return cstring_to_text("create");
        case 'r':
        case 'm': return cstring_to_text("replace");
        case 'd': return cstring_to_text("delete");
        case 't': return cstring_to_text("clear");
        case 's': return cstring_to_text("schema");
    }
    return NULL;
}

}  // namespace

void emitter_init(Emitter *out, int32 collection, Partition *parts, int nparts, ReturnSetInfo *rsinfo,
                  const TextSet *tenants) {
    out->rsinfo = rsinfo;
    out->tenants = tenants;
    out->last_pos = NULL;
    out->prefix_len = snprintf(out->prefix, sizeof out->prefix, "%d.", collection);
    int natts = 1;
    for (int i = 0; i < nparts; i++) natts = Max(natts, RelationGetDescr(parts[i].heap)->natts);
    out->all = (Datum *)palloc(sizeof(Datum) * natts);
    out->all_null = (bool *)palloc(sizeof(bool) * natts);
    out->all_versions = false;
    out->sight = NULL;
    out->every = 1;
    out->per_range = NULL;
}

void emit(Emitter *out, Partition *p, HeapTuple tuple, int64 seq, text *pos, Datum current, char row_seen) {
    TupleDesc desc = RelationGetDescr(p->heap);
    heap_deform_tuple(tuple, desc, out->all, out->all_null);  // once: heap_getattr per column walks the row again
    Datum v[kColumns];
    bool isnull[kColumns];
    for (int c = 0; c < kColumns; c++) {
        if (p->att[c] == InvalidAttrNumber) {  // previous_tenant of a 0.2 log
            v[c] = (Datum)0;
            isnull[c] = true;
            continue;
        }
        v[c] = out->all[p->att[c] - 1];
        isnull[c] = out->all_null[p->att[c] - 1];
        // A value stored out of line goes into the result as a value, not as a
        // pointer into the log's TOAST table.
        if (!isnull[c] && TupleDescAttr(desc, p->att[c] - 1)->attlen == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(v[c])))
            v[c] = PointerGetDatum(detoast_external_attr((struct varlena *)DatumGetPointer(v[c])));
    }
    // The image from before, whole (a replace may store a patch of its image after).
    if (!isnull[kPrevious] && !isnull[kCurrent]) v[kPrevious] = changefeed_previous_whole(v[kCurrent], v[kPrevious]);
    // read()'s 13 columns; read_ranges() has a 14th, resume_ranges, null here.
    Datum values[14];
    bool nulls[14] = {false, false, false, false, false, false, false, false, false, false, false, false, false, true};
    if (current != (Datum)0) {  // the document as it is now: no image from before goes with it
        v[kCurrent] = current;
        isnull[kCurrent] = false;
        isnull[kPrevious] = true;
    } else if (out->all_versions) {
        refuse_no_images(p, DatumGetChar(v[kOp]), isnull[kCurrent], out->sight != NULL ? NULL : &v[kDocId], seq);
    }
    values[0] = v[kSeq];
    values[1] = v[kTxid];
    values[2] = v[kRange];
    // A move is what the read's tenants see of it: the tenant it went to
    // gets a create without the image from before, the one it left a delete
    // without the image after (the scans let nothing else through).
    // Row-level security may turn a replace into either side too
    // (reader_sight_op()).
    const char logged = logical_op(DatumGetChar(v[kOp]), isnull[kPreviousTenant]);
    char seen = row_seen != 0 ? row_seen
                              : seen_op(out->tenants, logged, v[kTenant], isnull[kTenant], v[kPreviousTenant],
                                        isnull[kPreviousTenant]);
    bool moved_out = seen == 'd' && logged == 'm';
    if (out->sight != NULL && seen == 's') {  // the columns the reader may see
        if (!isnull[kCurrent]) v[kCurrent] = reader_visible_schema(out->sight, v[kCurrent]);
    } else if (out->sight != NULL) {
        // A document read from the table has the table's shape now.
        const int32 version = current != (Datum)0
                                  ? kShapeNow
                                  : version_of(out->sight, isnull[kSchemaVersion], v[kSchemaVersion], seq);
        if (!isnull[kCurrent]) v[kCurrent] = reader_visible_image(out->sight, version, v[kCurrent]);
        if (!isnull[kPrevious]) v[kPrevious] = reader_visible_image(out->sight, version, v[kPrevious]);
        if (!reader_sees_tenant(out->sight)) isnull[kTenant] = isnull[kPreviousTenant] = true;
    }
    text *op = operation_name(seen);
    values[3] = PointerGetDatum(op);
    nulls[3] = op == NULL;
    values[4] = v[kDocId], nulls[4] = isnull[kDocId];
    values[5] = v[kPartitionKey], nulls[5] = isnull[kPartitionKey];
    values[6] = v[kCurrent], nulls[6] = isnull[kCurrent] || seen == 'd';
    values[7] = v[kPrevious], nulls[7] = isnull[kPrevious] || seen == 'c';
    values[8] = v[kTtl], nulls[8] = isnull[kTtl];
    values[9] = v[kWrittenAt], nulls[9] = isnull[kWrittenAt];
    values[10] = moved_out ? v[kPreviousTenant] : v[kTenant];
    nulls[10] = moved_out ? isnull[kPreviousTenant] : isnull[kTenant];
    values[11] = PointerGetDatum(pos);
    nulls[11] = pos == NULL;
    char event_id[96];  // "<collection id>.<txid>.<seq>"
    int len = out->prefix_len;
    memcpy(event_id, out->prefix, len);
    len += pg_ulltoa_n(U64FromFullTransactionId(DatumGetFullTransactionId(v[kTxid])), event_id + len);
    event_id[len++] = '.';
    len += pg_ulltoa_n((uint64)seq, event_id + len);
    // The two sides of a move are two events (a tenant-scoped bridge of each
    // may publish to one stream, deduplicated by id): ".create" / ".delete".
    if ((logged == 'm' || logged == 'r') && (seen == 'c' || seen == 'd')) {
        const char *side = seen == 'c' ? ".create" : ".delete";
        memcpy(event_id + len, side, 7);
        len += 7;
    }
    values[12] = PointerGetDatum(cstring_to_text_with_len(event_id, len));
    values[13] = (Datum)0;
    tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
}

void emit_marker(Emitter *out, text *pos, const int32 *ranges, int nranges) {
    Datum *elems = (Datum *)palloc(sizeof(Datum) * Max(nranges, 1));
    for (int i = 0; i < nranges; i++) elems[i] = Int32GetDatum(ranges[i]);
    Datum values[14] = {};
    bool nulls[14];
    for (int c = 0; c < 14; c++) nulls[c] = true;
    values[11] = PointerGetDatum(pos), nulls[11] = false;
    values[13] = PointerGetDatum(construct_array(elems, nranges, INT4OID, sizeof(int32), true, TYPALIGN_INT));
    nulls[13] = false;
    tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc, values, nulls);
}

}  // namespace changefeed::read
