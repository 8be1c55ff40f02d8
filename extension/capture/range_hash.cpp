// The range of a partition key: capture stores it with every row, and
// range_of() shows it to SQL.
#include "pg.hpp"
#include "capture/range_hash.hpp"

extern "C" {
PG_FUNCTION_INFO_V1(changefeed_range_of);
}

uint32 changefeed_range_hash(const char *bytes, size_t len) {
    uint32 h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8)bytes[i];
        h *= 16777619u;
    }
    return h;
}

// range_of(partition_key text, ranges int): FNV-1a 32 of the key's bytes mod ranges.
Datum changefeed_range_of(PG_FUNCTION_ARGS) {
    text *key = PG_GETARG_TEXT_PP(0);
    int32 ranges = PG_GETARG_INT32(1);
    if (ranges < 1) ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ranges must be positive")));
    uint32 h = changefeed_range_hash(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
    PG_RETURN_INT32((int32)(h % (uint32)ranges));
}
