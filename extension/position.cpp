// SQL entry points for positions: changefeed.position_encode / position_decode.
// The codec itself is pure C++ (position_codec.cpp); these frames hold only
// plain C data, so ereport may jump out of them safely.
#include "pg.hpp"
#include "pg_snapshot.hpp"
#include "position_codec.hpp"

extern "C" {
#include "access/detoast.h"
#include "access/transam.h"
#include "access/xlog.h"
#include "storage/procarray.h"
}

// A position over this is refused before anything is decoded or allocated:
// 1 MiB of text holds two snapshots of ~49,000 in-progress transactions each.
// A snapshot lists at most GetMaxSnapshotXidCount() (max_connections and the
// other backends, plus max_prepared_transactions) of them, so the cap grows
// past 1 MiB only on a server configured for more; it never shrinks below it,
// so lowering those settings does not invalidate stored positions.
static const size_t kPositionTextFloor = 1024 * 1024;

namespace {

char *snapshot_text(Datum snapshot) {
    return DatumGetCString(DirectFunctionCall1(pg_snapshot_out, snapshot));
}

size_t position_text_cap(void) {
    size_t derived = changefeed_codec_max_text((uint64)GetMaxSnapshotXidCount());
    return derived > kPositionTextFloor ? derived : kPositionTextFloor;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(changefeed_position_encode);
PG_FUNCTION_INFO_V1(changefeed_position_decode);
PG_FUNCTION_INFO_V1(changefeed_snapshot_now);

// position_encode(lo pg_snapshot, hi pg_snapshot, last_seq bigint) -> text
Datum changefeed_position_encode(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(changefeed::kInvalidPosition),
                        errmsg("a position needs a lower snapshot")));
    char *lo = snapshot_text(PG_GETARG_DATUM(0));
    char *hi = PG_ARGISNULL(1) ? NULL : snapshot_text(PG_GETARG_DATUM(1));
    int64 last_seq = PG_ARGISNULL(2) ? 0 : PG_GETARG_INT64(2);
    size_t outlen = 128 + 4 * (strlen(lo) + (hi ? strlen(hi) : 0)) * 2;
    char *out = (char *)palloc(outlen);
    char err[256];
    const uint8 *key = changefeed_position_key();
    ChangefeedCodecStatus rc = changefeed_codec_encode(lo, hi, last_seq, GetSystemIdentifier(), MyDatabaseId,
                                                       changefeed_wal_point(), key, out, outlen, err, sizeof err);
    if (rc != CHANGEFEED_CODEC_OK)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cannot encode position: %s", err)));
    PG_RETURN_TEXT_P(cstring_to_text(out));
}

// position_decode(pos text) -> (lo pg_snapshot, hi pg_snapshot, last_seq bigint)
Datum changefeed_position_decode(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(changefeed::kInvalidPosition), errmsg("position must not be null")));
    // The length is checked on the datum's header, before it is detoasted.
    size_t cap = position_text_cap();
    size_t rawlen = toast_raw_datum_size(PG_GETARG_DATUM(0)) - VARHDRSZ;
    if (rawlen > cap)
        ereport(ERROR, (errcode(changefeed::kInvalidPosition),
                        errmsg("invalid position: position is %zu bytes long, longer than any "
                               "position this server issues (%zu)", rawlen, cap),
                        errhint("Use a position returned by changefeed.read() or "
                                "changefeed.current_position(), unchanged.")));
    text *encoded = PG_GETARG_TEXT_PP(0);
    size_t textlen = VARSIZE_ANY_EXHDR(encoded);
    // Each transaction id takes 8 encoded bytes (over 10 characters of text)
    // and at most 21 characters as snapshot text: this bounds both snapshots.
    size_t snaplen = 64 + 24 * (textlen + 4);
    char *lo = (char *)palloc(snaplen);
    char *hi = (char *)palloc(snaplen);
    int64_t last_seq = 0;
    int has_hi = 0;
    char err[256];
    const uint8 *key = changefeed_position_key();
    ChangefeedWalPoint at = {0, 0};
    // The transaction-id check against this server's next id comes after the
    // history check, below: a position of a forked history is that first.
    ChangefeedCodecStatus rc = changefeed_codec_decode(VARDATA_ANY(encoded), textlen, GetSystemIdentifier(),
                                                       MyDatabaseId, key, 0, cap, lo, hi, snaplen, &last_seq,
                                                       &has_hi, &at, err, sizeof err);
    if (rc == CHANGEFEED_CODEC_OUTDATED)
        ereport(ERROR,
                (errcode(changefeed::kInvalidPosition), errmsg("invalid position: %s", err),
                 errdetail("Positions are authenticated since changefeed issues \"cf2.\" "
                           "positions; \"cf1.\" positions could be forged and are refused."),
                 errhint("Restart the consumer from a checkpoint taken after the upgrade "
                         "(a position issued since then), or rebuild it from the table.")));
    if (rc == CHANGEFEED_CODEC_INVALID || rc == CHANGEFEED_CODEC_FORGED)
        ereport(ERROR, (errcode(changefeed::kInvalidPosition), errmsg("invalid position: %s", err),
                        errhint("Use a position returned by changefeed.read() or "
                                "changefeed.current_position(), unchanged.")));
    if (rc == CHANGEFEED_CODEC_FOREIGN)
        ereport(ERROR, (errcode(changefeed::kForeignPosition), errmsg("%s", err),
                        errdetail("Positions are valid only in the database that issued them."),
                        errhint("A restored or cloned cluster needs new positions; resync the consumer.")));
    if (rc != CHANGEFEED_CODEC_OK)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cannot decode position: %s", err)));

    changefeed_check_history(at);

    Datum values[3];
    bool nulls[3] = {false, false, false};
    values[0] = DirectFunctionCall1(pg_snapshot_in, CStringGetDatum(lo));
    if (has_hi)
        values[1] = DirectFunctionCall1(pg_snapshot_in, CStringGetDatum(hi));
    else
        nulls[1] = true;
    values[2] = Int64GetDatum(last_seq);
    // A standby may lag behind the primary that issued a position: only a
    // server that writes checks for positions from its future.
    if (!RecoveryInProgress()) {
        FullTransactionId next = ReadNextFullTransactionId();
        if (FullTransactionIdPrecedes(next, ((const PgSnapshot *)DatumGetPointer(values[0]))->xmax) ||
            (has_hi && FullTransactionIdPrecedes(next, ((const PgSnapshot *)DatumGetPointer(values[1]))->xmax)))
            ereport(ERROR,
                    (errcode(changefeed::kInvalidPosition),
                     errmsg("invalid position: position is newer than this database: restored from an older "
                            "backup?"),
                     errdetail("The position holds transactions this database has not reached yet."),
                     errhint("A database restored from a backup needs new positions: resume the consumer "
                             "from a checkpoint stored in this database or from changefeed.position_at(), "
                             "not from now.")));
    }

    TupleDesc desc;
    if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("record type expected")));
    desc = BlessTupleDesc(desc);
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

// snapshot_now() -> pg_snapshot: pg_current_snapshot() with our own
// transaction id among the in-progress ones.  PostgreSQL leaves the current
// transaction out of its snapshot, so a position cut from it inside a
// transaction that has written would count that transaction's changes as
// delivered before they commit; for every other session it is in progress.
Datum changefeed_snapshot_now(PG_FUNCTION_ARGS) {
    Datum current = DirectFunctionCall1(pg_current_snapshot, (Datum)0);
    const PgSnapshot *s = (const PgSnapshot *)DatumGetPointer(current);
    FullTransactionId own = GetTopFullTransactionIdIfAny();
    if (!FullTransactionIdIsValid(own) || !FullTransactionIdPrecedes(own, s->xmax)) PG_RETURN_DATUM(current);
    for (uint32 i = 0; i < s->nxip; i++)
        if (FullTransactionIdEquals(s->xip[i], own)) PG_RETURN_DATUM(current);
    Size size = offsetof(PgSnapshot, xip) + sizeof(FullTransactionId) * (s->nxip + 1);
    PgSnapshot *t = (PgSnapshot *)palloc(size);
    SET_VARSIZE(t, size);
    t->nxip = s->nxip + 1;
    t->xmin = FullTransactionIdPrecedes(own, s->xmin) ? own : s->xmin;
    t->xmax = s->xmax;
    uint32 k = 0;
    bool placed = false;
    for (uint32 i = 0; i < s->nxip; i++) {  // xip stays sorted
        if (!placed && FullTransactionIdPrecedes(own, s->xip[i])) {
            t->xip[k++] = own;
            placed = true;
        }
        t->xip[k++] = s->xip[i];
    }
    if (!placed) t->xip[k++] = own;
    PG_RETURN_POINTER(t);
}

}  // extern "C"
