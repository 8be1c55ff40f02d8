// SQL entry points for positions: changefeed.position_encode / position_decode.
// The codec itself is pure C++ (position_codec.cpp); these frames hold only
// plain C data, so ereport may jump out of them safely.
#include "pg.hpp"
#include "position/pg_snapshot.hpp"
#include "position/position.hpp"
#include "position/position_codec.hpp"
#include "position/position_history.hpp"
#include "position/position_key.hpp"
#include "sqlstates.hpp"

extern "C" {
#include "access/detoast.h"
#include "access/transam.h"
#include "access/xlog.h"
#include "storage/procarray.h"
#include "utils/snapmgr.h"
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
        ereport(ERROR, (errcode(changefeed::kInvalidPosition), errmsg("a position needs a lower snapshot")));
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

void changefeed_decode_position(Datum pos, Datum values[3], bool nulls[3]) {
    // The length is checked on the datum's header, before it is detoasted.
    size_t cap = position_text_cap();
    size_t rawlen = toast_raw_datum_size(pos) - VARHDRSZ;
    if (rawlen > cap)
        ereport(ERROR, (errcode(changefeed::kInvalidPosition),
                        errmsg("invalid position: position is %zu bytes long, longer than any "
                               "position this server issues (%zu)",
                               rawlen, cap),
                        errhint("Use a position returned by changefeed.read() or "
                                "changefeed.current_position(), unchanged.")));
    text *encoded = DatumGetTextPP(pos);
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
                                                       MyDatabaseId, key, 0, cap, lo, hi, snaplen, &last_seq, &has_hi,
                                                       &at, err, sizeof err);
    if (rc == CHANGEFEED_CODEC_OUTDATED)
        ereport(ERROR, (errcode(changefeed::kInvalidPosition), errmsg("invalid position: %s", err),
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

    nulls[0] = nulls[1] = nulls[2] = false;
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
            ereport(ERROR, (errcode(changefeed::kInvalidPosition),
                            errmsg("invalid position: position is newer than this database: restored from an older "
                                   "backup?"),
                            errdetail("The position holds transactions this database has not reached yet."),
                            errhint("A database restored from a backup needs new positions: resume the consumer "
                                    "from a checkpoint stored in this database or from changefeed.position_at(), "
                                    "not from now.")));
    }
}

// position_decode(pos text) -> (lo pg_snapshot, hi pg_snapshot, last_seq bigint)
Datum changefeed_position_decode(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0)) ereport(ERROR, (errcode(changefeed::kInvalidPosition), errmsg("position must not be null")));
    Datum values[3];
    bool nulls[3];
    changefeed_decode_position(PG_GETARG_DATUM(0), values, nulls);
    TupleDesc desc;
    if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("record type expected")));
    desc = BlessTupleDesc(desc);
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

// Plain C helpers of statement_snapshot().
static FullTransactionId xid_relative_to(FullTransactionId next, TransactionId xid) {
    // As xid8funcs.c does: the xid lies within 2^31 of the next one.
    return FullTransactionIdFromU64(U64FromFullTransactionId(next) + (int32)(xid - XidFromFullTransactionId(next)));
}

static int compare_full_xids(const void *a, const void *b) {
    uint64 x = U64FromFullTransactionId(*(const FullTransactionId *)a);
    uint64 y = U64FromFullTransactionId(*(const FullTransactionId *)b);
    return x < y ? -1 : x > y ? 1 : 0;
}

// The statement's snapshot as a pg_snapshot.  pg_current_snapshot() copies
// the snapshot's xip only; a snapshot taken during recovery (a hot standby)
// keeps every transaction in progress in subxip instead (procarray.c), so
// there pg_current_snapshot() lists none in progress, and a position cut
// from it would count transactions still running on the primary as
// delivered: their changes would be skipped once they commit.  The top-level
// transactions are always among them (subtransactions may be missing when
// overflowed, and the log names top-level transactions only).
PgSnapshot *changefeed_statement_snapshot(void) {
    Snapshot cur = GetActiveSnapshot();
    if (cur == NULL) elog(ERROR, "no active snapshot set");
    if (!cur->takenDuringRecovery)
        return (PgSnapshot *)DatumGetPointer(DirectFunctionCall1(pg_current_snapshot, (Datum)0));
    FullTransactionId next = ReadNextFullTransactionId();
    uint32 cap = cur->xcnt + (cur->subxcnt > 0 ? (uint32)cur->subxcnt : 0);
    PgSnapshot *s = (PgSnapshot *)palloc(offsetof(PgSnapshot, xip) + sizeof(FullTransactionId) * Max(cap, 1));
    s->xmin = xid_relative_to(next, cur->xmin);
    s->xmax = xid_relative_to(next, cur->xmax);
    uint32 n = 0;
    for (uint32 i = 0; i < cap; i++) {
        TransactionId xid = i < cur->xcnt ? cur->xip[i] : cur->subxip[i - cur->xcnt];
        FullTransactionId f = xid_relative_to(next, xid);
        if (!FullTransactionIdPrecedes(f, s->xmin) && FullTransactionIdPrecedes(f, s->xmax)) s->xip[n++] = f;
    }
    if (n > 1) qsort(s->xip, n, sizeof(FullTransactionId), compare_full_xids);
    uint32 k = 0;
    for (uint32 i = 0; i < n; i++)  // sorted, without duplicates, as pg_snapshot keeps them
        if (k == 0 || !FullTransactionIdEquals(s->xip[k - 1], s->xip[i])) s->xip[k++] = s->xip[i];
    s->nxip = k;
    SET_VARSIZE(s, offsetof(PgSnapshot, xip) + sizeof(FullTransactionId) * k);
    return s;
}

// snapshot_now() -> pg_snapshot: the statement's snapshot with our own
// transaction id among the in-progress ones.  PostgreSQL leaves the current
// transaction out of its snapshot, so a position cut from it inside a
// transaction that has written would count that transaction's changes as
// delivered before they commit; for every other session it is in progress.
Datum changefeed_snapshot_now(PG_FUNCTION_ARGS) {
    PgSnapshot *snapshot = changefeed_statement_snapshot();
    Datum current = PointerGetDatum(snapshot);
    const PgSnapshot *s = snapshot;
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
