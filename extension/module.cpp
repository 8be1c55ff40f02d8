// Module entry: load-time set-up (settings, transaction tracking, the
// notifier's hooks) and small SQL helpers.
#include "pg.hpp"
#include "position_codec.hpp"
#include "settings.hpp"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void);
PG_FUNCTION_INFO_V1(changefeed_range_of);
PG_FUNCTION_INFO_V1(changefeed_preloaded);
PG_FUNCTION_INFO_V1(changefeed_captured_in_xact);
}

namespace changefeed {
bool preloaded = false;
}

void _PG_init(void) {
    changefeed::preloaded = process_shared_preload_libraries_in_progress;
    changefeed_define_settings();
    changefeed_xact_tracking_init();
    changefeed_notifier_init();
}

// range_of(partition_key text, ranges int): FNV-1a 32 of the key's bytes mod ranges.
Datum changefeed_range_of(PG_FUNCTION_ARGS) {
    text *key = PG_GETARG_TEXT_PP(0);
    int32 ranges = PG_GETARG_INT32(1);
    if (ranges < 1)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("ranges must be positive")));
    uint32 h = changefeed_range_hash(VARDATA_ANY(key), VARSIZE_ANY_EXHDR(key));
    PG_RETURN_INT32((int32)(h % (uint32)ranges));
}

Datum changefeed_preloaded(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(changefeed::preloaded);
}

Datum changefeed_captured_in_xact(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(changefeed_xact_captured());
}
