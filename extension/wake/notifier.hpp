// The notifier and the database's background workers (extension/wake/notifier.cpp).
// Include after pg.hpp.
#pragma once

void changefeed_notifier_init(void);
// At commit: queues wake-ups of `collection_ids` (or of every collection when
// `overflow`) for this database's notifier and counts `rows` towards its next
// tick.  Never raises an error.
void changefeed_notifier_publish(const int32 *collection_ids, int n, bool overflow, int64 rows);
// Commit wake-ups of long-poll reads (read_ranges(..., wait)); only when the
// library is preloaded (the shared memory is there).
bool changefeed_commit_wait_available(void);
// How many commits of collections sharing `collection_id`'s slot were
// published so far; read it before the snapshot of a read, then wait with it.
uint64 changefeed_commits_seen(int32 collection_id);
// Sleeps until a commit after `seen` or `timeout_ms`; whether one came.
// Checks for interrupts (a cancel raises an error).
bool changefeed_commit_wait(int32 collection_id, uint64 seen, long timeout_ms);
// Starts this database's workers unless they run; whether the notifier runs.
bool changefeed_notifier_ensure(void);
// In-transaction NOTIFY changefeed_<collection_id> (without preloading).
void changefeed_notify_collection(int32 collection_id);

// A database's background workers; notifier.cpp keeps their shared slot and
// starts and stops them together.
enum WorkerKind { kNotifier = 0, kMaintainer = 1, kWorkerKinds = 2 };
// In a worker: connects to `database` and claims the worker's place; false
// when another worker of that kind serves the database (then exit).
bool changefeed_worker_attach(Oid database, int kind);
// In a worker: whether it was asked to exit (DROP DATABASE).
bool changefeed_worker_exit_requested(void);
// In a worker: sleeps until its latch is set or `wait_ms` pass, then takes
// interrupts and a reloaded configuration.
void changefeed_worker_sleep(long wait_ms);
