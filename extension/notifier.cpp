// Wake-up without serializing writers (DESIGN.md 3.3).
//
// NOTIFY takes a cluster-wide lock at commit, so writers must not send it.
// When the library is preloaded, capture only notes which collections the
// transaction touched; a commit callback hands them to shared memory and sets
// the latch of this database's notifier, a background worker that sends one
// `NOTIFY changefeed_<collection id>` per wake-up, however many commits it
// coalesces.  The first capture (or enable()) in a database starts its
// notifier.  Without preloading, capture falls back to an in-transaction
// NOTIFY, once per transaction and collection.
#include "pg.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/utility.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

PGDLLEXPORT void changefeed_notifier_main(Datum arg);
PG_FUNCTION_INFO_V1(changefeed_ensure_notifier);
}

namespace {

constexpr int kSlots = 64;            // databases with a notifier
constexpr int kPending = 64;          // collections queued per database before "all"
constexpr int kTouched = 64;          // collections noted per transaction before "all"
constexpr long kIdleWaitMs = 60000;   // the worker sleeps on its latch; this is a safety net
constexpr long kStartTimeoutMs = 10000;

enum SlotState { kFree = 0, kStarting = 1, kRunning = 2 };

struct Slot {
    Oid database;
    int state;
    pid_t pid;
    Latch *latch;
    TimestampTz claimed_at;
    bool exit_requested;
    bool overflow;
    int npending;
    int32 pending[kPending];
    int64 rows_since_tick;  // captured rows committed since the last tick
};

struct Shared {
    slock_t mutex;
    Slot slots[kSlots];
};

Shared *shared = NULL;
shmem_request_hook_type prev_shmem_request = NULL;
shmem_startup_hook_type prev_shmem_startup = NULL;
ProcessUtility_hook_type prev_process_utility = NULL;

// Collections captured by the current transaction, with the subtransaction
// level that first captured each (an aborted subtransaction forgets its own).
struct Touched {
    int32 collection_id;
    int level;
};
Touched touched[kTouched];
int ntouched = 0;
bool touched_overflow = false;
int64 xact_rows = 0;  // rows captured by this transaction (an upper bound)
bool warned_no_worker = false;

Slot *find_slot(Oid database) {
    for (int i = 0; i < kSlots; i++)
        if (shared->slots[i].state != kFree && shared->slots[i].database == database)
            return &shared->slots[i];
    return NULL;
}

void channel_name(char *buf, size_t len, int32 collection_id) {
    snprintf(buf, len, "changefeed_%d", collection_id);
}

void notify_collection(int32 collection_id) {
    char channel[NAMEDATALEN];
    channel_name(channel, sizeof channel, collection_id);
    Async_Notify(channel, NULL);
}

// ---- shared memory -------------------------------------------------------

void request_shmem(void) {
    if (prev_shmem_request) prev_shmem_request();
    RequestAddinShmemSpace(MAXALIGN(sizeof(Shared)));
}

void startup_shmem(void) {
    if (prev_shmem_startup) prev_shmem_startup();
    bool found;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared = (Shared *)ShmemInitStruct("changefeed notifier", sizeof(Shared), &found);
    if (!found) {
        memset(shared, 0, sizeof(Shared));
        SpinLockInit(&shared->mutex);
    }
    LWLockRelease(AddinShmemInitLock);
}

// ---- starting and stopping a database's notifier --------------------------

bool ensure_notifier(void) {
    if (shared == NULL || !OidIsValid(MyDatabaseId)) return false;
    TimestampTz now = GetCurrentTimestamp();
    SpinLockAcquire(&shared->mutex);
    Slot *slot = find_slot(MyDatabaseId);
    if (slot != NULL && (slot->state == kRunning ||
                         !TimestampDifferenceExceeds(slot->claimed_at, now, kStartTimeoutMs))) {
        SpinLockRelease(&shared->mutex);
        return true;
    }
    if (slot == NULL)
        for (int i = 0; i < kSlots && slot == NULL; i++)
            if (shared->slots[i].state == kFree) slot = &shared->slots[i];
    if (slot == NULL) {
        SpinLockRelease(&shared->mutex);
        if (!warned_no_worker)
            ereport(WARNING, (errmsg("changefeed: no notifier slot left for this database"),
                              errdetail("Consumers fall back to polling.")));
        warned_no_worker = true;
        return false;
    }
    slot->database = MyDatabaseId;
    slot->state = kStarting;
    slot->pid = 0;
    slot->latch = NULL;
    slot->claimed_at = now;
    slot->exit_requested = false;
    SpinLockRelease(&shared->mutex);

    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;  // the next capture starts a new one
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "changefeed");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "changefeed_notifier_main");
    snprintf(worker.bgw_name, BGW_MAXLEN, "changefeed notifier for database %u", MyDatabaseId);
    snprintf(worker.bgw_type, BGW_MAXLEN, "changefeed notifier");
    worker.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
    if (RegisterDynamicBackgroundWorker(&worker, NULL)) return true;

    SpinLockAcquire(&shared->mutex);
    if (slot->state == kStarting && slot->database == MyDatabaseId) slot->state = kFree;
    SpinLockRelease(&shared->mutex);
    if (!warned_no_worker)
        ereport(WARNING, (errmsg("changefeed: could not start the notifier (max_worker_processes reached)"),
                          errdetail("Consumers fall back to polling.")));
    warned_no_worker = true;
    return false;
}

// Asks the notifier of `database` to exit and waits for it (DROP DATABASE
// refuses while a worker is connected).
void stop_notifier(Oid database) {
    if (shared == NULL || !OidIsValid(database)) return;
    for (int i = 0; i < 500; i++) {  // up to 5 s
        SpinLockAcquire(&shared->mutex);
        Slot *slot = find_slot(database);
        Latch *latch = NULL;
        if (slot != NULL) {
            slot->exit_requested = true;
            latch = slot->latch;
        }
        SpinLockRelease(&shared->mutex);
        if (slot == NULL) return;
        if (latch) SetLatch(latch);
        pg_usleep(10000L);
        CHECK_FOR_INTERRUPTS();
    }
}

void process_utility(PlannedStmt *pstmt, const char *query, bool read_only_tree,
                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment *env,
                     DestReceiver *dest, QueryCompletion *qc) {
    Node *stmt = pstmt->utilityStmt;
    if (IsA(stmt, DropdbStmt)) stop_notifier(get_database_oid(((DropdbStmt *)stmt)->dbname, true));
    if (prev_process_utility)
        prev_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
}

// ---- transaction tracking -------------------------------------------------

void publish_commit(void) {
    if (shared == NULL || (ntouched == 0 && !touched_overflow)) return;
    Latch *latch = NULL;
    SpinLockAcquire(&shared->mutex);
    Slot *slot = find_slot(MyDatabaseId);
    if (slot != NULL) {
        for (int i = 0; i < ntouched && !slot->overflow; i++) {
            bool queued = false;
            for (int j = 0; j < slot->npending && !queued; j++)
                queued = slot->pending[j] == touched[i].collection_id;
            if (queued) continue;
            if (slot->npending < kPending)
                slot->pending[slot->npending++] = touched[i].collection_id;
            else
                slot->overflow = true;
        }
        if (touched_overflow) slot->overflow = true;
        slot->rows_since_tick += xact_rows;
        latch = slot->latch;
    }
    SpinLockRelease(&shared->mutex);
    if (latch) SetLatch(latch);
}

void forget_touched(void) {
    ntouched = 0;
    touched_overflow = false;
    xact_rows = 0;
}

void on_xact(XactEvent event, void *) {
    switch (event) {
        case XACT_EVENT_COMMIT:
        case XACT_EVENT_PARALLEL_COMMIT:
            // Runs after the commit is visible; must not raise an error.
            if (changefeed::preloaded) publish_commit();
            forget_touched();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:  // COMMIT PREPARED wakes no one; consumers' polling covers it
            forget_touched();
            break;
        default:
            break;
    }
}

void on_subxact(SubXactEvent event, SubTransactionId, SubTransactionId, void *) {
    int level = GetCurrentTransactionNestLevel();
    if (event == SUBXACT_EVENT_ABORT_SUB) {
        int kept = 0;
        for (int i = 0; i < ntouched; i++)
            if (touched[i].level < level) touched[kept++] = touched[i];
        ntouched = kept;
    } else if (event == SUBXACT_EVENT_COMMIT_SUB) {
        for (int i = 0; i < ntouched; i++)
            if (touched[i].level >= level) touched[i].level = level - 1;
    }
}

// ---- the worker -------------------------------------------------------------

void worker_exit(int, Datum arg) {
    Slot *slot = (Slot *)DatumGetPointer(arg);
    SpinLockAcquire(&shared->mutex);
    if (slot->pid == MyProcPid) {
        slot->state = kFree;
        slot->pid = 0;
        slot->latch = NULL;
        slot->npending = 0;
        slot->overflow = false;
    }
    SpinLockRelease(&shared->mutex);
}

void notify_all_collections(void) {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed notifier: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    int rc = SPI_execute("SELECT pg_catalog.pg_notify(changefeed.channel_of(id), NULL) FROM changefeed.collection",
                         false, 0);
    PopActiveSnapshot();
    if (rc != SPI_OK_SELECT) elog(ERROR, "changefeed notifier: cannot list collections");
    SPI_finish();
}

// Runs one statement in its own transaction.  A failure is logged and the
// worker goes on: it must not stop the wake-ups.
void run_guarded(const char *activity, const char *sql) {
    MemoryContext caller = CurrentMemoryContext;
    PG_TRY();
    {
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        pgstat_report_activity(STATE_RUNNING, activity);
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
        PushActiveSnapshot(GetTransactionSnapshot());
        SPI_execute(sql, false, 0);
        PopActiveSnapshot();
        SPI_finish();
        CommitTransactionCommand();
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller);
        ErrorData *error = CopyErrorData();
        FlushErrorState();
        AbortCurrentTransaction();
        ereport(WARNING, (errmsg("changefeed: %s failed: %s", activity, error->message)));
        FreeErrorData(error);
    }
    PG_END_TRY();
    pgstat_report_activity(STATE_IDLE, NULL);
}

// The statements are no-ops when the extension was dropped from this database.
void run_maintenance(void) {
    run_guarded("changefeed maintain",
                "SELECT changefeed.maintain() FROM pg_catalog.pg_extension WHERE extname = 'changefeed'");
}

void record_tick(void) {
    run_guarded("changefeed tick",
                "INSERT INTO changefeed.tick (snap_xmax, snap)"
                " SELECT pg_catalog.pg_snapshot_xmax(s), s FROM pg_catalog.pg_current_snapshot() s,"
                " pg_catalog.pg_extension e WHERE e.extname = 'changefeed'");
}

}  // namespace

// changefeed.maintain_interval: seconds between the notifier's maintain() runs (0: never).
int changefeed_maintain_interval = 300;
// changefeed.tick_rows / tick_interval: a tick after this many captured rows,
// or this many milliseconds after the first row since the last tick.
int changefeed_tick_rows = 1000;
int changefeed_tick_interval = 1000;

void changefeed_notifier_init(void) {
    DefineCustomIntVariable("changefeed.maintain_interval",
                            "Seconds between maintain() runs of the background worker (0 disables).",
                            NULL, &changefeed_maintain_interval, 300, 0, 7 * 24 * 3600, PGC_SIGHUP,
                            GUC_UNIT_S, NULL, NULL, NULL);
    DefineCustomIntVariable("changefeed.tick_rows",
                            "Captured rows after which the background worker records a tick.",
                            NULL, &changefeed_tick_rows, 1000, 100, 10000000, PGC_SIGHUP, 0, NULL,
                            NULL, NULL);
    DefineCustomIntVariable("changefeed.tick_interval",
                            "Longest time between a captured commit and the next tick.", NULL,
                            &changefeed_tick_interval, 1000, 10, 3600000, PGC_SIGHUP, GUC_UNIT_MS,
                            NULL, NULL, NULL);
    RegisterXactCallback(on_xact, NULL);
    RegisterSubXactCallback(on_subxact, NULL);
    if (!changefeed::preloaded) return;
    prev_shmem_request = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = process_utility;
}

void changefeed_note_capture(int32 collection_id) {
    xact_rows++;
    for (int i = 0; i < ntouched; i++)
        if (touched[i].collection_id == collection_id) return;
    if (ntouched == 0 && changefeed::preloaded) ensure_notifier();
    if (ntouched < kTouched)
        touched[ntouched++] = Touched{collection_id, GetCurrentTransactionNestLevel()};
    else
        touched_overflow = true;
    if (!changefeed::preloaded) notify_collection(collection_id);
}

bool changefeed_xact_captured(void) {
    return ntouched > 0 || touched_overflow;
}

void changefeed_notifier_main(Datum arg) {
    Oid database = DatumGetObjectId(arg);
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);

    SpinLockAcquire(&shared->mutex);
    Slot *slot = find_slot(database);
    bool mine = slot != NULL && slot->state == kStarting;
    if (mine) {
        slot->state = kRunning;
        slot->pid = MyProcPid;
        slot->latch = MyLatch;
    }
    SpinLockRelease(&shared->mutex);
    if (!mine) proc_exit(0);  // another notifier serves this database
    // Its own commits (notifications, ticks) need not wait for the WAL flush:
    // a tick or a wake-up lost in a crash costs a wider window or a poll.
    SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);
    before_shmem_exit(worker_exit, PointerGetDatum(slot));
    pgstat_report_activity(STATE_IDLE, NULL);

    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    int32 ids[kPending];
    TimestampTz last_maintenance = 0;  // run once at start
    TimestampTz first_untracked = 0;   // when rows were first seen since the last tick
    for (;;) {
        long wait_ms = kIdleWaitMs;
        if (first_untracked != 0) {
            long until = TimestampDifferenceMilliseconds(
                GetCurrentTimestamp(), TimestampTzPlusMilliseconds(first_untracked, changefeed_tick_interval));
            wait_ms = Min(wait_ms, Max(until, 1L));
        }
        if (changefeed_maintain_interval > 0) {
            long interval_ms = changefeed_maintain_interval * 1000L;
            if (TimestampDifferenceExceeds(last_maintenance, GetCurrentTimestamp(), (int)Min(interval_ms, INT_MAX))) {
                run_maintenance();
                last_maintenance = GetCurrentTimestamp();
            }
            long until = TimestampDifferenceMilliseconds(
                GetCurrentTimestamp(), TimestampTzPlusMilliseconds(last_maintenance, interval_ms));
            wait_ms = Min(wait_ms, Max(until, 1L));
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
                        PG_WAIT_EXTENSION);
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }

        SpinLockAcquire(&shared->mutex);
        bool exit_requested = slot->exit_requested;
        int n = slot->npending;
        bool all = slot->overflow;
        memcpy(ids, slot->pending, sizeof(int32) * n);
        slot->npending = 0;
        slot->overflow = false;
        int64 untracked = slot->rows_since_tick;
        SpinLockRelease(&shared->mutex);
        if (exit_requested) proc_exit(0);

        if (untracked > 0) {
            TimestampTz now = GetCurrentTimestamp();
            if (first_untracked == 0) first_untracked = now;
            if (untracked >= changefeed_tick_rows ||
                TimestampDifferenceExceeds(first_untracked, now, changefeed_tick_interval)) {
                SpinLockAcquire(&shared->mutex);
                slot->rows_since_tick -= untracked;
                SpinLockRelease(&shared->mutex);
                first_untracked = 0;
                record_tick();
            }
        }
        if (n == 0 && !all) continue;

        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        pgstat_report_activity(STATE_RUNNING, "changefeed notify");
        if (all)
            notify_all_collections();
        else
            for (int i = 0; i < n; i++) notify_collection(ids[i]);
        CommitTransactionCommand();  // the notifications go out here
        pgstat_report_activity(STATE_IDLE, NULL);
    }
}

extern "C" Datum changefeed_ensure_notifier(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(changefeed::preloaded && ensure_notifier());
}
