// Maintenance worker: one per database (backend_type 'changefeed maintainer'),
// started and stopped with the notifier (notifier.cpp), so that wake-ups never
// wait on maintenance.
//
// Every changefeed.maintain_interval seconds it runs the steps of maintain()
// (extension/maintenance/retention.sql), each in its own transaction with
// lock_timeout = changefeed.maintenance_lock_timeout and its statement bounded
// by changefeed.maintenance_statement_timeout (maintenance_limits.cpp):
//   create partitions; drop each expired partition (its horizon recorded in
//   the same transaction); clean the default partition; cut off each
//   collection's changes older than its own retention; each collection's TTL
//   sweep; clean old ticks; prune the projectors' deduplication store.
// A step touching a user table (TTL) is never in a transaction holding a lock
// on the log, and a partition step touches no user table.  A failed step is
// logged as a WARNING naming the step and the error, and retried on the next
// round; the other steps go on: a table owner's trigger that sleeps in a TTL
// delete holds up its own step for at most the statement timeout.  The TTL sweep runs user code as the table
// owner in a security-restricted operation (ttl.cpp), never as this worker's
// superuser.
#include "pg.hpp"
#include "maintenance/maintenance_limits.hpp"
#include "settings.hpp"
#include "wake/notifier.hpp"
#include "wake/worker_transaction.hpp"

extern "C" {
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

PGDLLEXPORT void changefeed_maintainer_main(Datum arg);
}

namespace {

constexpr long kIdleWaitMs = 60000;

MemoryContext round_context = NULL;  // what a round lists; reset per round

// One statement of a step: up to one int4 parameter; the first column of the
// result (bigint, and optionally a text second column) is kept.
struct StepQuery {
    const char *sql;
    bool has_arg;
    int32 arg;
    bool collect;  // keep every row (else only the first value)
    int64 value;   // first row, first column (0 if none)
    int nrows;
    int64 *values;  // when collecting: in round_context
    char **names;   // when collecting and there is a second column
};

// One step's statement, run inside changefeed_worker_transaction.  While a
// maintain() call runs (it holds maintenance's advisory lock) the statement is
// skipped: that call does the same work.
void step_body(void *arg) {
    StepQuery *q = (StepQuery *)arg;
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    if (SPI_execute("SELECT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('changefeed.maintain'))", false,
                    0) != SPI_OK_SELECT)
        elog(ERROR, "cannot take maintenance's lock");
    bool isnull_lock;
    bool locked = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull_lock));
    Oid argtypes[1] = {INT4OID};
    Datum args[1] = {Int32GetDatum(q->arg)};
    changefeed_step_timeout_begin_c();
    int rc = locked ? SPI_execute_with_args(q->sql, q->has_arg ? 1 : 0, argtypes, args, NULL, false, 0) : SPI_OK_SELECT;
    (void)changefeed_step_timeout_end_c();
    if (rc != SPI_OK_SELECT) elog(ERROR, "unexpected result %d", rc);
    int n = locked ? (int)SPI_processed : 0;
    TupleDesc desc = SPI_tuptable->tupdesc;
    if (q->collect) {
        MemoryContext old = MemoryContextSwitchTo(round_context);
        q->values = (int64 *)palloc0(sizeof(int64) * (n + 1));
        q->names = (char **)palloc0(sizeof(char *) * (n + 1));
        MemoryContextSwitchTo(old);
    }
    for (int i = 0; i < n && (q->collect || i == 0); i++) {
        bool isnull;
        Datum d = SPI_getbinval(SPI_tuptable->vals[i], desc, 1, &isnull);
        int64 v = isnull ? 0 : DatumGetInt64(d);
        if (i == 0) q->value = v;
        if (!q->collect) continue;
        q->values[i] = v;
        if (desc->natts >= 2) {
            char *name = SPI_getvalue(SPI_tuptable->vals[i], desc, 2);
            q->names[i] = MemoryContextStrdup(round_context, name ? name : "?");
        }
    }
    q->nrows = n;
    PopActiveSnapshot();
    SPI_finish();
}

// Runs `q` in its own transaction with the maintenance lock_timeout.  A
// failure is logged as a WARNING naming the step and retried next round.
bool run_step(const char *step, StepQuery *q) {
    q->value = 0;
    q->nrows = 0;
    char what[256];
    snprintf(what, sizeof what, "changefeed maintenance: step \"%s\"", step);
    bool done = changefeed_worker_transaction(step, what, "The step is retried on the next run.", step_body, q);
    // A step that failed (timed out, say) may have left its bound armed.
    (void)changefeed_step_timeout_end_c();
    if (!done) q->nrows = 0;
    return done;
}

void exit_if_asked(void) {
    CHECK_FOR_INTERRUPTS();
    if (changefeed_worker_exit_requested()) proc_exit(0);
}

// One round of maintenance (none when the extension is not in this database).
void run_round(void) {
    MemoryContextReset(round_context);
    StepQuery q = {};
    q.sql = "SELECT count(*) FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'changefeed'";
    if (!run_step("find the extension", &q) || q.value == 0) return;

    q = {};
    q.sql = "SELECT changefeed.create_partitions(7, pg_catalog.now())::pg_catalog.int8";
    (void)run_step("create partitions", &q);
    exit_if_asked();

    StepQuery parts = {};
    parts.sql = "SELECT part::pg_catalog.oid::pg_catalog.int8, part::pg_catalog.text"
                " FROM changefeed.expired_partitions(pg_catalog.now())";
    parts.collect = true;
    (void)run_step("list expired partitions", &parts);
    for (int i = 0; i < parts.nrows; i++) {
        char step[NAMEDATALEN + 64];
        snprintf(step, sizeof step, "drop %s", parts.names[i]);
        q = {};
        q.sql = "SELECT 0::pg_catalog.int8 FROM changefeed.prune_partition($1::pg_catalog.oid::pg_catalog.regclass,"
                " pg_catalog.now())";
        q.has_arg = true;
        q.arg = (int32)(Oid)parts.values[i];
        (void)run_step(step, &q);
        exit_if_asked();
    }

    q = {};
    q.sql = "SELECT changefeed.prune_default(pg_catalog.now())";
    (void)run_step("prune default partition", &q);
    exit_if_asked();

    StepQuery all = {};
    all.sql = "SELECT id::pg_catalog.int8, relid::pg_catalog.regclass::pg_catalog.text FROM changefeed.collection"
              " ORDER BY id";
    all.collect = true;
    (void)run_step("list collections", &all);
    for (int i = 0; i < all.nrows; i++) {
        char step[2 * NAMEDATALEN + 64];
        snprintf(step, sizeof step, "expire history of %s", all.names[i]);
        q = {};
        q.sql = "SELECT changefeed.expire_history($1, pg_catalog.now())";
        q.has_arg = true;
        q.arg = (int32)all.values[i];
        (void)run_step(step, &q);
        exit_if_asked();
    }

    StepQuery ttl = {};
    ttl.sql = "SELECT id::pg_catalog.int8, relid::pg_catalog.regclass::pg_catalog.text FROM changefeed.collection"
              " WHERE ttl_column IS NOT NULL AND disabled_at IS NULL ORDER BY id";
    ttl.collect = true;
    (void)run_step("list TTL collections", &ttl);
    for (int i = 0; i < ttl.nrows; i++) {
        char step[2 * NAMEDATALEN + 64];
        snprintf(step, sizeof step, "expire %s", ttl.names[i]);
        q = {};
        q.sql = "SELECT changefeed.expire_rows($1, pg_catalog.now())";
        q.has_arg = true;
        q.arg = (int32)ttl.values[i];
        (void)run_step(step, &q);
        exit_if_asked();
    }

    q = {};
    q.sql = "SELECT changefeed.prune_ticks(pg_catalog.now())";
    (void)run_step("prune ticks", &q);
    exit_if_asked();

    q = {};
    q.sql = "SELECT changefeed.prune_applied(pg_catalog.now())";
    (void)run_step("prune applied", &q);
}

}  // namespace

void changefeed_maintainer_main(Datum arg) {
    if (!changefeed_worker_attach(DatumGetObjectId(arg), kMaintainer)) proc_exit(0);
    round_context = AllocSetContextCreate(TopMemoryContext, "changefeed maintenance", ALLOCSET_DEFAULT_SIZES);
    TimestampTz last_round = 0;  // the first round runs at start
    for (;;) {
        long wait_ms = kIdleWaitMs;
        if (changefeed_maintain_interval > 0) {
            long interval_ms = changefeed_maintain_interval * 1000L;
            if (TimestampDifferenceExceeds(last_round, GetCurrentTimestamp(), (int)Min(interval_ms, INT_MAX))) {
                run_round();
                last_round = GetCurrentTimestamp();
            }
            long until = TimestampDifferenceMilliseconds(GetCurrentTimestamp(),
                                                         TimestampTzPlusMilliseconds(last_round, interval_ms));
            wait_ms = Min(wait_ms, Max(until, 1L));
        }
        changefeed_worker_sleep(wait_ms);
        if (changefeed_worker_exit_requested()) proc_exit(0);
    }
}
