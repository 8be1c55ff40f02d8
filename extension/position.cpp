// SQL entry points for positions: changefeed.position_encode / position_decode.
// The codec itself is pure C++ (position_codec.cpp); these frames hold only
// plain C data, so ereport may jump out of them safely.
#include "pg.hpp"
#include "position_codec.hpp"

extern "C" {
#include "access/xlog.h"
}

namespace {

char *snapshot_text(Datum snapshot) {
    return DatumGetCString(DirectFunctionCall1(pg_snapshot_out, snapshot));
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(changefeed_position_encode);
PG_FUNCTION_INFO_V1(changefeed_position_decode);

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
    int rc = changefeed_codec_encode(lo, hi, last_seq, GetSystemIdentifier(), MyDatabaseId, out,
                                     outlen, err, sizeof err);
    if (rc != 0)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cannot encode position: %s", err)));
    PG_RETURN_TEXT_P(cstring_to_text(out));
}

// position_decode(pos text) -> (lo pg_snapshot, hi pg_snapshot, last_seq bigint)
Datum changefeed_position_decode(PG_FUNCTION_ARGS) {
    if (PG_ARGISNULL(0))
        ereport(ERROR, (errcode(changefeed::kInvalidPosition), errmsg("position must not be null")));
    char *encoded = text_to_cstring(PG_GETARG_TEXT_PP(0));
    // Each transaction id takes 8 encoded bytes (over 10 characters of text)
    // and at most 21 characters as snapshot text: this bounds both snapshots.
    size_t snaplen = 64 + 24 * (strlen(encoded) + 4);
    char *lo = (char *)palloc(snaplen);
    char *hi = (char *)palloc(snaplen);
    int64_t last_seq = 0;
    int has_hi = 0;
    char err[256];
    int rc = changefeed_codec_decode(encoded, GetSystemIdentifier(), MyDatabaseId, lo, hi, snaplen,
                                     &last_seq, &has_hi, err, sizeof err);
    if (rc == 1)
        ereport(ERROR, (errcode(changefeed::kInvalidPosition), errmsg("invalid position: %s", err),
                        errhint("Use a position returned by changefeed.read() or "
                                "changefeed.current_position(), unchanged.")));
    if (rc == 2)
        ereport(ERROR, (errcode(changefeed::kForeignPosition), errmsg("%s", err),
                        errdetail("Positions are valid only in the database that issued them."),
                        errhint("A restored or cloned cluster needs new positions; resync the consumer.")));
    if (rc != 0)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR), errmsg("cannot decode position: %s", err)));

    TupleDesc desc;
    if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("record type expected")));
    desc = BlessTupleDesc(desc);
    Datum values[3];
    bool nulls[3] = {false, false, false};
    values[0] = DirectFunctionCall1(pg_snapshot_in, CStringGetDatum(lo));
    if (has_hi)
        values[1] = DirectFunctionCall1(pg_snapshot_in, CStringGetDatum(hi));
    else
        nulls[1] = true;
    values[2] = Int64GetDatum(last_seq);
    PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

}  // extern "C"
