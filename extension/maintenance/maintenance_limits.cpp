// Bounds on what maintenance does for one collection's owner at everyone's
// expense: the time one step may run (changefeed.maintenance_statement_timeout)
// and the longest retention (changefeed.max_retention).
//
// A step's time bound is PostgreSQL's statement timeout, armed for the step
// alone: maintain() is one statement, and the maintenance worker runs no
// client statements, so neither would otherwise bound a step.  A timeout the
// caller's own statement had (statement_timeout) is kept: the earlier of the
// two fires, and the caller's is re-armed when the step ends.
#include "pg.hpp"
#include "maintenance/maintenance_limits.hpp"
#include "settings.hpp"

extern "C" {
#include "datatype/timestamp.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(changefeed_step_timeout_begin);
PG_FUNCTION_INFO_V1(changefeed_step_timeout_end);
PG_FUNCTION_INFO_V1(changefeed_max_retention_interval);
}

namespace {

bool armed = false;            // a step's bound is set
bool outer_active = false;     // the statement had a timeout of its own
TimestampTz outer_finish = 0;  // when that one fires
TimestampTz deadline = 0;      // when the step's fires

}  // namespace

void changefeed_step_timeout_begin_c(void) {
    armed = false;
    if (changefeed_maintenance_statement_timeout <= 0) return;
    outer_active = get_timeout_active(STATEMENT_TIMEOUT);
    outer_finish = outer_active ? get_timeout_finish_time(STATEMENT_TIMEOUT) : 0;
    deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), changefeed_maintenance_statement_timeout);
    if (!outer_active || deadline < outer_finish) enable_timeout_at(STATEMENT_TIMEOUT, deadline);
    armed = true;
}

bool changefeed_step_timeout_end_c(void) {
    if (!armed) return false;
    armed = false;
    bool passed = GetCurrentTimestamp() >= deadline;
    if (outer_active && outer_finish <= deadline) return false;  // ours was never armed
    // A cancel of ours that fired after the step's work was done, or while
    // its error was being handled, is not carried into what follows.
    if (passed && get_timeout_indicator(STATEMENT_TIMEOUT, true)) QueryCancelPending = false;
    if (outer_active)
        enable_timeout_at(STATEMENT_TIMEOUT, outer_finish);
    else
        disable_timeout(STATEMENT_TIMEOUT, false);
    return passed;
}

extern "C" {

// step_timeout_begin() RETURNS void: bounds the maintenance step that starts now.
Datum changefeed_step_timeout_begin(PG_FUNCTION_ARGS) {
    changefeed_step_timeout_begin_c();
    PG_RETURN_VOID();
}

// step_timeout_end() RETURNS bool: lifts the bound; whether the step ran past it.
Datum changefeed_step_timeout_end(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(changefeed_step_timeout_end_c());
}

// max_retention() RETURNS interval: changefeed.max_retention as an interval
// of days and a time of day (so it compares with retentions as written).
Datum changefeed_max_retention_interval(PG_FUNCTION_ARGS) {
    Interval *result = (Interval *)palloc0(sizeof(Interval));
    int64 secs = changefeed_max_retention;
    result->day = (int32)(secs / SECS_PER_DAY);
    result->time = (secs % SECS_PER_DAY) * USECS_PER_SEC;
    PG_RETURN_INTERVAL_P(result);
}
}
