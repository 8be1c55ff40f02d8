// A background worker's unit of work in a transaction of its own.
//
// The notifier (wake-ups, ticks) and the maintainer (each maintenance step)
// must survive any error of their work: the error is logged, the transaction
// aborted, and the worker goes on to try again later.
#include "pg.hpp"
#include "maintenance/maintainer.hpp"
#include "wake/worker_transaction.hpp"

extern "C" {
#include "pgstat.h"
#include "utils/timestamp.h"
}

bool changefeed_worker_transaction(const char *activity, const char *what, const char *retry, void (*body)(void *),
                                   void *arg) {
    MemoryContext caller = CurrentMemoryContext;
    volatile bool done = false;
    PG_TRY();
    {
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        changefeed_set_local_lock_timeout();
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
