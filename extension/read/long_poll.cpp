// read_ranges()'s wait (long_poll.hpp).
#include "pg.hpp"
#include "read/long_poll.hpp"
#include "read/window_scan.hpp"
#include "sqlstates.hpp"
#include "wake/notifier.hpp"
#include "wake/wait_alone.hpp"

#include <cmath>

extern "C" {
#include "access/xlog.h"
#include "storage/proc.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

namespace changefeed::read {

namespace {

constexpr double kMaxWaitSeconds = 60;

}  // namespace

long wait_ms_of(FunctionCallInfo fcinfo, int n) {
    if (PG_NARGS() <= n || PG_ARGISNULL(n)) return 0;
    const Interval *wait = PG_GETARG_INTERVAL_P(n);
    double seconds = wait->time / 1e6 + wait->day * (double)SECS_PER_DAY +
                     wait->month * (double)DAYS_PER_MONTH * SECS_PER_DAY;
    if (seconds < 0 || seconds > kMaxWaitSeconds)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("wait must be between 0 and %g seconds", kMaxWaitSeconds),
                        errhint("Call read_ranges() again to wait longer.")));
    return (long)ceil(seconds * 1000);
}

void check_can_wait(FunctionCallInfo fcinfo) {
    if (!changefeed_commit_wait_available())
        ereport(ERROR,
                (errcode(changefeed::kNoCommitWakeups),
                 errmsg("read_ranges() cannot wait: changefeed is not in shared_preload_libraries"),
                 errdetail("Commits wake waiting reads through shared memory, which needs the library preloaded."),
                 errhint("Preload the library, or read without wait and LISTEN "
                         "(see docs/runbooks/long-poll-unavailable.md).")));
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(changefeed::kNoCommitWakeups), errmsg("read_ranges() cannot wait on a standby"),
                        errdetail("Commits replayed from the primary wake no waiting read."),
                        errhint("Read without wait and poll (see docs/runbooks/long-poll-unavailable.md).")));
    if (IsolationUsesXactSnapshot())
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("read_ranges() cannot wait in a %s transaction",
                               IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
                        errdetail("Its snapshot would hold back vacuum while it waits, and never see a new commit."),
                        errhint("Wait in a READ COMMITTED transaction, or read without wait.")));
    refuse_own_changes();  // the more telling reason first
    if (FullTransactionIdIsValid(GetTopFullTransactionIdIfAny()))
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("read_ranges() cannot wait in a transaction that has written"),
                        errdetail("Its transaction id would hold back vacuum while it waits."),
                        errhint("Wait in a transaction of its own, or read without wait.")));
    if (!ThereAreNoReadyPortals())
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_TRANSACTION_STATE), errmsg("read_ranges() cannot wait while a cursor is open"),
                 errdetail("The cursor's snapshot would be left to vacuum while the read waits."),
                 errhint("Close the cursor first, or read without wait.")));
    if (!changefeed_read_is_statement_alone(fcinfo))
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("read_ranges() can wait only as a statement of its own"),
                        errdetail("The statement's snapshot is left to vacuum while the read waits, so nothing else "
                                  "may read with it: no other table or subquery, no function that may read tables "
                                  "(volatile, or not immutable and not built in), no call from inside a function."),
                        errhint("Send SELECT * FROM changefeed.read_ranges(...) alone, or read without wait.")));
}

void release_xmin(void) {
    InvalidateCatalogSnapshot();
    MyProc->xmin = InvalidTransactionId;
}

}  // namespace changefeed::read
