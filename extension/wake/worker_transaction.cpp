// A background worker's unit of work in a transaction of its own.
//
// The notifier (wake-ups, ticks) and the maintainer (each maintenance step)
// must survive any error of their work: the error is logged, the transaction
// aborted, and the worker goes on to try again later.
#include "pg.hpp"
#include "settings.hpp"
#include "wake/worker_transaction.hpp"

extern "C" {
#include "pgstat.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
}

namespace {

// SET LOCAL lock_timeout = changefeed.maintenance_lock_timeout: a worker's
// step never waits long on a lock a user's transaction holds.
void set_local_lock_timeout(void) {
    char value[32];
    snprintf(value, sizeof value, "%dms", changefeed_maintenance_lock_timeout);
    (void)set_config_option("lock_timeout", value, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
}

}  // namespace

bool changefeed_worker_transaction(const char *activity, const char *what, const char *retry, void (*body)(void *),
                                   void *arg) {
    MemoryContext caller = CurrentMemoryContext;
    volatile bool done = false;
    PG_TRY();
    {
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        set_local_lock_timeout();
        pgstat_report_activity(STATE_RUNNING, activity);
        body(arg);
        CommitTransactionCommand();
        done = true;
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller);
        ErrorData *error = CopyErrorData();
        FlushErrorState();
        AbortCurrentTransaction();
        ereport(WARNING, (errcode(error->sqlerrcode), errmsg("%s failed: %s", what, error->message),
                          errdetail("SQLSTATE %s. %s", unpack_sql_state(error->sqlerrcode), retry)));
        FreeErrorData(error);
    }
    PG_END_TRY();
    pgstat_report_activity(STATE_IDLE, NULL);
    return done;
}
