// Wake-up without serializing writers.
//
// NOTIFY takes a cluster-wide lock at commit, so writers must not send it.
// When the library is preloaded, capture only notes which collections the
// transaction touched (xact_tracking.cpp); at commit they are queued in shared
// memory here (changefeed_notifier_publish) and the latch of this database's
// notifier is set: a background worker that sends one
// `NOTIFY changefeed_<collection id>` per wake-up, however many commits it
// coalesces.  The first capture (or enable()) in a database starts its
// notifier.  Without preloading, capture falls back to an in-transaction
// NOTIFY, once per transaction and collection.
//
// Maintenance runs in a worker of its own (maintainer.cpp), started and
// stopped with the notifier; this file keeps the shared slot of both.  The
// notifier itself only sends notifications and records ticks, each in a
// guarded transaction: an error is logged and retried, never fatal.
#include "pg.hpp"
#include "settings.hpp"
#include "wake/notifier.hpp"
#include "wake/worker_transaction.hpp"

extern "C" {
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "commands/dbcommands.h"
#include "common/hashfn.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include <signal.h>

PGDLLEXPORT void changefeed_notifier_main(Datum arg);
PG_FUNCTION_INFO_V1(changefeed_ensure_notifier);
}

namespace {

constexpr int kSlots = 64;           // databases with a notifier
constexpr int kCommitSlots = 128;    // commit wake-ups of long-poll reads, hashed by collection
constexpr int kPending = 64;         // collections queued per database before "all"
constexpr long kIdleWaitMs = 60000;  // the worker sleeps on its latch; this is a safety net
constexpr long kStartTimeoutMs = 10000;
constexpr long kRetryMinMs = 100;  // first retry of failed wake-ups or a failed tick
constexpr long kRetryMaxMs = 10000;

enum SlotState { kFree = 0, kStarting = 1, kRunning = 2 };

// One of the database's workers (see WorkerKind in pg.hpp).
struct Worker {
    int state;
    pid_t pid;
    Latch *latch;
    TimestampTz claimed_at;
    TimestampTz failed_at;  // last failed start: not tried again for a while
    bool exit_requested;
};

struct Slot {
    Oid database;
    Worker workers[kWorkerKinds];
    // Wake-ups waiting for the notifier.
    bool overflow;
    int npending;
    int32 pending[kPending];
    int64 rows_since_tick;  // captured rows committed since the last tick
};

// Long-poll reads (read_ranges(..., wait)) sleep on the condition variable of
// their collection's commit slot; every commit that captured rows of a
// collection hashed there counts `commits` up and broadcasts, with no lock of
// ours.  Collisions only wake a reader that finds nothing and sleeps again.
struct CommitSlot {
    pg_atomic_uint64 commits;
    ConditionVariable cv;
};

struct Shared {
    slock_t mutex;
    Slot slots[kSlots];
    CommitSlot commit_slots[kCommitSlots];
};

Shared *shared = NULL;
shmem_request_hook_type prev_shmem_request = NULL;
shmem_startup_hook_type prev_shmem_startup = NULL;
ProcessUtility_hook_type prev_process_utility = NULL;

bool warned_no_worker = false;

bool slot_in_use(const Slot *slot) {
    for (int k = 0; k < kWorkerKinds; k++)
        if (slot->workers[k].state != kFree) return true;
    return false;
}

Slot *find_slot(Oid database) {
    for (int i = 0; i < kSlots; i++)
        if (slot_in_use(&shared->slots[i]) && shared->slots[i].database == database) return &shared->slots[i];
    return NULL;
}

const char *const kWorkerType[kWorkerKinds] = {"changefeed notifier", "changefeed maintainer"};
const char *const kWorkerMain[kWorkerKinds] = {"changefeed_notifier_main", "changefeed_maintainer_main"};

void channel_name(char *buf, size_t len, int32 collection_id) {
    snprintf(buf, len, "changefeed_%d", collection_id);
}

void notify_collection(int32 collection_id) {
    char channel[NAMEDATALEN];
    channel_name(channel, sizeof channel, collection_id);
    Async_Notify(channel, NULL);
}

CommitSlot *commit_slot(Oid database, int32 collection_id) {
    uint32 h = hash_combine(murmurhash32((uint32)database), murmurhash32((uint32)collection_id));
    return &shared->commit_slots[h % kCommitSlots];
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
        for (int i = 0; i < kCommitSlots; i++) {
            pg_atomic_init_u64(&shared->commit_slots[i].commits, 0);
            ConditionVariableInit(&shared->commit_slots[i].cv);
        }
    }
    LWLockRelease(AddinShmemInitLock);
}

// ---- starting and stopping a database's notifier --------------------------

// Starts the worker `kind` of this database unless it runs or is starting.
// Called with the mutex held on a slot of this database; releases it.
bool start_worker(Slot *slot, int kind, TimestampTz now) {
    Worker *w = &slot->workers[kind];
    if (w->state == kRunning ||
        (w->state == kStarting && !TimestampDifferenceExceeds(w->claimed_at, now, kStartTimeoutMs))) {
        SpinLockRelease(&shared->mutex);
        return true;
    }
    if (w->state == kFree && w->failed_at != 0 && !TimestampDifferenceExceeds(w->failed_at, now, kStartTimeoutMs)) {
        SpinLockRelease(&shared->mutex);  // no worker slot was free a moment ago: spare the write path
        return false;
    }
    slot->database = MyDatabaseId;
    w->state = kStarting;
    w->pid = 0;
    w->latch = NULL;
    w->claimed_at = now;
    w->exit_requested = false;
    SpinLockRelease(&shared->mutex);

    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = BGW_NEVER_RESTART;  // the next capture starts a new one
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "changefeed");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", kWorkerMain[kind]);
    snprintf(worker.bgw_name, BGW_MAXLEN, "%s for database %u", kWorkerType[kind], MyDatabaseId);
    snprintf(worker.bgw_type, BGW_MAXLEN, "%s", kWorkerType[kind]);
    worker.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
    if (RegisterDynamicBackgroundWorker(&worker, NULL)) return true;

    SpinLockAcquire(&shared->mutex);
    if (w->state == kStarting && slot->database == MyDatabaseId) {
        w->state = kFree;
        w->failed_at = now;
    }
    SpinLockRelease(&shared->mutex);
    if (!warned_no_worker)
        ereport(WARNING,
                (errmsg("changefeed: could not start the %s (max_worker_processes reached)", kWorkerType[kind]),
                 errdetail(kind == kNotifier ? "Consumers fall back to polling."
                                             : "Run changefeed.maintain() from elsewhere (cron, processors).")));
    warned_no_worker = true;
    return false;
}

// Starts this database's notifier and maintainer unless they run.  Returns
// whether the notifier runs or is starting.
bool ensure_notifier(void) {
    if (shared == NULL || !OidIsValid(MyDatabaseId)) return false;
    TimestampTz now = GetCurrentTimestamp();
    bool running = true;
    for (int kind = 0; kind < kWorkerKinds; kind++) {
        SpinLockAcquire(&shared->mutex);
        Slot *slot = find_slot(MyDatabaseId);
        if (slot == NULL)
            for (int i = 0; i < kSlots && slot == NULL; i++)
                if (!slot_in_use(&shared->slots[i])) {
                    slot = &shared->slots[i];
                    for (int k = 0; k < kWorkerKinds; k++) slot->workers[k].failed_at = 0;
                }
        if (slot == NULL) {
            SpinLockRelease(&shared->mutex);
            if (!warned_no_worker)
                ereport(WARNING, (errmsg("changefeed: no notifier slot left for this database"),
                                  errdetail("Consumers fall back to polling.")));
            warned_no_worker = true;
            return false;
        }
        bool started = start_worker(slot, kind, now);  // releases the mutex
        if (kind == kNotifier) running = started;
    }
    return running;
}

// Asks the workers of `database` to exit and waits for them (DROP DATABASE
// refuses while a worker is connected).  A worker still there after a second
// (the maintainer in a long step) is sent SIGTERM.
void stop_workers(Oid database) {
    if (shared == NULL || !OidIsValid(database)) return;
    for (int i = 0; i < 500; i++) {  // up to 5 s
        Latch *latches[kWorkerKinds] = {};
        pid_t pids[kWorkerKinds] = {};
        SpinLockAcquire(&shared->mutex);
        Slot *slot = find_slot(database);
        if (slot != NULL)
            for (int k = 0; k < kWorkerKinds; k++) {
                slot->workers[k].exit_requested = true;
                latches[k] = slot->workers[k].latch;
                if (slot->workers[k].state == kRunning) pids[k] = slot->workers[k].pid;
            }
        SpinLockRelease(&shared->mutex);
        if (slot == NULL) return;
        for (int k = 0; k < kWorkerKinds; k++) {
            if (latches[k]) SetLatch(latches[k]);
            if (i == 100 && pids[k] != 0) (void)kill(pids[k], SIGTERM);
        }
        pg_usleep(10000L);
        CHECK_FOR_INTERRUPTS();
    }
}

// Whether DROP DATABASE `stmt` will get past the checks dropdb() makes before
// it drops: only then may its workers be stopped (a refused DROP DATABASE
// must not silence another database's wake-ups).
Oid database_to_drop(DropdbStmt *stmt, ProcessUtilityContext context) {
    if (context != PROCESS_UTILITY_TOPLEVEL || IsTransactionBlock()) return InvalidOid;
    Oid database = get_database_oid(stmt->dbname, true);
    if (!OidIsValid(database) || database == MyDatabaseId) return InvalidOid;
    if (!pg_database_ownercheck(database, GetUserId())) return InvalidOid;
    HeapTuple tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(database));
    if (!HeapTupleIsValid(tuple)) return InvalidOid;
    bool is_template = ((Form_pg_database)GETSTRUCT(tuple))->datistemplate;
    ReleaseSysCache(tuple);
    return is_template ? InvalidOid : database;
}

void process_utility(PlannedStmt *pstmt, const char *query, bool read_only_tree, ProcessUtilityContext context,
                     ParamListInfo params, QueryEnvironment *env, DestReceiver *dest, QueryCompletion *qc) {
    Node *stmt = pstmt->utilityStmt;
    if (IsA(stmt, DropdbStmt)) stop_workers(database_to_drop((DropdbStmt *)stmt, context));
    if (prev_process_utility)
        prev_process_utility(pstmt, query, read_only_tree, context, params, env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query, read_only_tree, context, params, env, dest, qc);
}

// ---- the interface of capture (xact_tracking.cpp) ----------------------------

}  // namespace

void changefeed_notifier_publish(const int32 *collection_ids, int n, bool overflow, int64 rows) {
    if (shared == NULL || (n == 0 && !overflow)) return;
    // Long-poll readers first: they read themselves, the notifier's hop is for LISTEN.
    if (overflow) {
        for (int i = 0; i < kCommitSlots; i++) {
            pg_atomic_fetch_add_u64(&shared->commit_slots[i].commits, 1);
            ConditionVariableBroadcast(&shared->commit_slots[i].cv);
        }
    } else {
        for (int i = 0; i < n; i++) {
            CommitSlot *c = commit_slot(MyDatabaseId, collection_ids[i]);
            pg_atomic_fetch_add_u64(&c->commits, 1);  // a full barrier: the commit is visible before
            ConditionVariableBroadcast(&c->cv);
        }
    }
    Latch *latch = NULL;
    SpinLockAcquire(&shared->mutex);
    Slot *slot = find_slot(MyDatabaseId);
    if (slot != NULL && slot->workers[kNotifier].state != kFree) {
        for (int i = 0; i < n && !slot->overflow; i++) {
            bool queued = false;
            for (int j = 0; j < slot->npending && !queued; j++) queued = slot->pending[j] == collection_ids[i];
            if (queued) continue;
            if (slot->npending < kPending)
                slot->pending[slot->npending++] = collection_ids[i];
            else
                slot->overflow = true;
        }
        if (overflow) slot->overflow = true;
        slot->rows_since_tick += rows;
        latch = slot->workers[kNotifier].latch;
    }
    SpinLockRelease(&shared->mutex);
    if (latch) SetLatch(latch);
}

bool changefeed_commit_wait_available(void) {
    return shared != NULL;
}

uint64 changefeed_commits_seen(int32 collection_id) {
    uint64 n = pg_atomic_read_u64(&commit_slot(MyDatabaseId, collection_id)->commits);
    pg_memory_barrier();  // read before the snapshot the caller takes next
    return n;
}

bool changefeed_commit_wait(int32 collection_id, uint64 seen, long timeout_ms) {
    CommitSlot *c = commit_slot(MyDatabaseId, collection_id);
    bool committed = false;
    ConditionVariablePrepareToSleep(&c->cv);
    while (!(committed = pg_atomic_read_u64(&c->commits) != seen) && timeout_ms > 0) {
        TimestampTz start = GetCurrentTimestamp();
        // Sleeps on our latch; checks for interrupts on every wake-up.
        if (ConditionVariableTimedSleep(&c->cv, timeout_ms, PG_WAIT_EXTENSION)) break;
        timeout_ms -= TimestampDifferenceMilliseconds(start, GetCurrentTimestamp());
    }
    ConditionVariableCancelSleep();
    return committed || pg_atomic_read_u64(&c->commits) != seen;
}

bool changefeed_notifier_ensure(void) {
    return ensure_notifier();
}

void changefeed_notify_collection(int32 collection_id) {
    notify_collection(collection_id);
}

namespace {

// ---- the workers ------------------------------------------------------------

int my_kind = -1;  // in a worker: which one it is

void worker_exit(int, Datum arg) {
    Slot *slot = (Slot *)DatumGetPointer(arg);
    SpinLockAcquire(&shared->mutex);
    Worker *w = &slot->workers[my_kind];
    if (w->pid == MyProcPid) {
        w->state = kFree;
        w->pid = 0;
        w->latch = NULL;
        if (my_kind == kNotifier) {
            slot->npending = 0;
            slot->overflow = false;
        }
    }
    SpinLockRelease(&shared->mutex);
}

Slot *my_slot = NULL;

void notify_all_collections(void) {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "changefeed notifier: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    int rc = SPI_execute("SELECT pg_catalog.pg_notify(changefeed.channel_of(id), NULL) FROM changefeed.collection",
                         false, 0);
    PopActiveSnapshot();
    if (rc != SPI_OK_SELECT) elog(ERROR, "changefeed notifier: cannot list collections");
    SPI_finish();
}

struct Wakeups {
    const int32 *ids;
    int n;
    bool all;
};

void send_wakeups(void *arg) {
    const Wakeups *w = (const Wakeups *)arg;
    if (w->all)
        notify_all_collections();
    else
        for (int i = 0; i < w->n; i++) notify_collection(w->ids[i]);
}  // the notifications go out at the commit

// Sends the wake-ups in one transaction.  An error (say a full notification
// queue, or a lock it cannot get) is logged and the transaction aborted; the
// caller keeps the collections and tries again later.  Never exits the worker.
bool send_notifications(const int32 *ids, int n, bool all, long retry_ms) {
    Wakeups w = {ids, n, all};
    char retry[64];
    snprintf(retry, sizeof retry, "They are sent again in %ld ms.", retry_ms);
    return changefeed_worker_transaction("changefeed notify", "changefeed notifier: sending wake-ups", retry,
                                         send_wakeups, &w);
}

void execute_statement(void *arg) {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    SPI_execute((const char *)arg, false, 0);
    PopActiveSnapshot();
    SPI_finish();
}

// The statement is a no-op when the extension was dropped from this database.
bool record_tick(void) {
    static const char sql[] = "INSERT INTO changefeed.tick (snap_xmax, snap)"
                              " SELECT pg_catalog.pg_snapshot_xmax(s), s FROM pg_catalog.pg_current_snapshot() s,"
                              " pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'changefeed'";
    return changefeed_worker_transaction("changefeed tick", "changefeed notifier: recording a tick",
                                         "The next tick covers it.", execute_statement, (void *)sql);
}

long next_backoff(long previous) {
    return previous == 0 ? kRetryMinMs : Min(previous * 2, kRetryMaxMs);
}

}  // namespace

bool changefeed_worker_attach(Oid database, int kind) {
    pqsignal(SIGTERM, die);
    BackgroundWorkerUnblockSignals();
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);

    SpinLockAcquire(&shared->mutex);
    Slot *slot = find_slot(database);
    bool mine = slot != NULL && slot->workers[kind].state == kStarting;
    if (mine) {
        slot->workers[kind].state = kRunning;
        slot->workers[kind].pid = MyProcPid;
        slot->workers[kind].latch = MyLatch;
    }
    SpinLockRelease(&shared->mutex);
    if (!mine) return false;  // another one serves this database
    my_kind = kind;
    my_slot = slot;
    // Worker SQL resolves names in pg_catalog only (and names tables with their schema).
    SetConfigOption("search_path", "pg_catalog", PGC_SUSET, PGC_S_OVERRIDE);
    before_shmem_exit(worker_exit, PointerGetDatum(slot));
    pgstat_report_activity(STATE_IDLE, NULL);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    return true;
}

void changefeed_worker_sleep(long wait_ms) {
    (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms, PG_WAIT_EXTENSION);
    ResetLatch(MyLatch);
    CHECK_FOR_INTERRUPTS();
    if (ConfigReloadPending) {
        ConfigReloadPending = false;
        ProcessConfigFile(PGC_SIGHUP);
    }
}

bool changefeed_worker_exit_requested(void) {
    SpinLockAcquire(&shared->mutex);
    bool requested = my_slot->workers[my_kind].exit_requested;
    SpinLockRelease(&shared->mutex);
    return requested;
}

void changefeed_notifier_init(void) {
    if (!changefeed::preloaded) return;
    prev_shmem_request = shmem_request_hook;
    shmem_request_hook = request_shmem;
    prev_shmem_startup = shmem_startup_hook;
    shmem_startup_hook = startup_shmem;
    prev_process_utility = ProcessUtility_hook;
    ProcessUtility_hook = process_utility;
}

void changefeed_notifier_main(Datum arg) {
    if (!changefeed_worker_attach(DatumGetObjectId(arg), kNotifier)) proc_exit(0);
    Slot *slot = my_slot;
    // Its own commits (notifications, ticks) need not wait for the WAL flush:
    // a tick or a wake-up lost in a crash costs a wider window or a poll.
    SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

    // Collections to notify: taken from the slot, kept here until sent.
    int32 ids[kPending];
    int n = 0;
    bool all = false;
    long notify_backoff = 0;  // after a failed send: wait this long, doubling
    TimestampTz notify_retry_at = 0;
    long tick_backoff = 0;
    TimestampTz first_untracked = 0;  // when rows were first seen since the last tick
    for (;;) {
        long wait_ms = kIdleWaitMs;
        TimestampTz now = GetCurrentTimestamp();
        if (first_untracked != 0) {
            long until = TimestampDifferenceMilliseconds(
                now, TimestampTzPlusMilliseconds(first_untracked, changefeed_tick_interval + tick_backoff));
            wait_ms = Min(wait_ms, Max(until, 1L));
        }
        if (n > 0 || all) wait_ms = Min(wait_ms, Max(TimestampDifferenceMilliseconds(now, notify_retry_at), 1L));
        changefeed_worker_sleep(wait_ms);

        SpinLockAcquire(&shared->mutex);
        bool exit_requested = slot->workers[kNotifier].exit_requested;
        for (int i = 0; i < slot->npending && !all; i++) {
            bool queued = false;
            for (int j = 0; j < n && !queued; j++) queued = ids[j] == slot->pending[i];
            if (queued) continue;
            if (n < kPending)
                ids[n++] = slot->pending[i];
            else
                all = true;
        }
        all = all || slot->overflow;
        slot->npending = 0;
        slot->overflow = false;
        int64 untracked = slot->rows_since_tick;
        SpinLockRelease(&shared->mutex);
        if (exit_requested) proc_exit(0);

        now = GetCurrentTimestamp();
        if (untracked > 0) {
            if (first_untracked == 0) first_untracked = now;
            if ((untracked >= changefeed_tick_rows && tick_backoff == 0) ||
                TimestampDifferenceExceeds(first_untracked, now, changefeed_tick_interval + tick_backoff)) {
                if (record_tick()) {
                    SpinLockAcquire(&shared->mutex);
                    slot->rows_since_tick -= untracked;
                    SpinLockRelease(&shared->mutex);
                    first_untracked = 0;
                    tick_backoff = 0;
                } else {
                    first_untracked = GetCurrentTimestamp();  // tried again after a while
                    tick_backoff = next_backoff(tick_backoff);
                }
            }
        }
        if ((n == 0 && !all) || now < notify_retry_at) continue;

        long backoff = next_backoff(notify_backoff);
        if (send_notifications(ids, n, all, backoff)) {
            n = 0;
            all = false;
            notify_backoff = 0;
            notify_retry_at = 0;
            // Under a steady write load every commit would wake this worker
            // for a transaction of its own, and each wake-up costs the writer
            // a signal: on a busy machine that took CPU from the writers.
            // Sleeping outside WaitLatch lets commits set the latch without
            // signalling; the commits of the interval share the next wake-up.
            // A commit after a quiet spell is still sent at once.
            if (changefeed_notify_interval > 0) pg_usleep((long)(changefeed_notify_interval * 1000.0));
        } else {
            notify_backoff = backoff;
            notify_retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), backoff);
        }
    }
}

extern "C" Datum changefeed_ensure_notifier(PG_FUNCTION_ARGS) {
    PG_RETURN_BOOL(changefeed::preloaded && ensure_notifier());
}
