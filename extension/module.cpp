// Module entry: load-time set-up (settings, transaction tracking, the
// notifier's hooks) and small SQL helpers.
#include "pg.hpp"
#include "capture/xact_tracking.hpp"
#include "read/read_memory.hpp"
#include "settings.hpp"
#include "wake/notifier.hpp"

extern "C" {
PG_MODULE_MAGIC;

void _PG_init(void);
PG_FUNCTION_INFO_V1(changefeed_preloaded);
PG_FUNCTION_INFO_V1(changefeed_captured_in_xact);
}

void _PG_init(void) {
    changefeed::preloaded = process_shared_preload_libraries_in_progress;
    changefeed_define_settings();
    changefeed_xact_tracking_init();
    changefeed_notifier_init();
    changefeed_read_memory_init();
}

Datum changefeed_preloaded(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(changefeed::preloaded);
}

Datum changefeed_captured_in_xact(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(changefeed_xact_captured());
}
