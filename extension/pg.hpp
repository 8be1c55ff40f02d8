// PostgreSQL headers for the extension's C++ sources.
//
// Rules: PostgreSQL errors longjmp, so a function that can raise one never has
// C++ objects with destructors in its frame (the longjmp would skip them); C++
// code that can throw (the position codec, position_codec.cpp) is pure, never
// includes this header, and is called through C wrappers that catch every
// exception and return a status (ChangefeedCodecStatus), which the caller turns
// into an ereport only after the C++ frames are gone.
#pragma once

// position_codec.cpp refuses to compile when this is defined.
#define CHANGEFEED_PG_HEADERS 1

extern "C" {
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
}

// Where the server API differs between PostgreSQL majors.
#include "pg_compat.hpp"

namespace changefeed {

// Library loaded through shared_preload_libraries (set in _PG_init).
extern bool preloaded;

// The SQLSTATEs of ours raised from C++: every one is here, and its meaning is
// documented once, in the registry extension/sql/00_sqlstates.sql.
constexpr int kNoPrimaryKey = MAKE_SQLSTATE('C', 'F', '0', '0', '1');
constexpr int kNotEnabled = MAKE_SQLSTATE('C', 'F', '0', '0', '2');
constexpr int kInvalidOption = MAKE_SQLSTATE('C', 'F', '0', '0', '3');
constexpr int kInvalidPosition = MAKE_SQLSTATE('C', 'F', '0', '0', '4');
constexpr int kForeignPosition = MAKE_SQLSTATE('C', 'F', '0', '0', '5');
constexpr int kOwnChanges = MAKE_SQLSTATE('C', 'F', '0', '0', '9');
constexpr int kDdlRefused = MAKE_SQLSTATE('C', 'F', '0', '1', '3');
constexpr int kWriteRefused = MAKE_SQLSTATE('C', 'F', '0', '1', '4');
constexpr int kNotReplayedYet = MAKE_SQLSTATE('C', 'F', '0', '1', '6');
constexpr int kOtherHistory = MAKE_SQLSTATE('C', 'F', '0', '1', '7');

}  // namespace changefeed

// Capture-side transaction tracking (extension/xact_tracking.cpp).
void changefeed_xact_tracking_init(void);
// Notes that this transaction captured a row of `collection_id`.
void changefeed_note_capture(int32 collection_id);
// Whether this transaction captured any row.
bool changefeed_xact_captured(void);

// The notifier (extension/notifier.cpp).
void changefeed_notifier_init(void);
// At commit: queues wake-ups of `collection_ids` (or of every collection when
// `overflow`) for this database's notifier and counts `rows` towards its next
// tick.  Never raises an error.
void changefeed_notifier_publish(const int32 *collection_ids, int n, bool overflow, int64 rows);
// Starts this database's workers unless they run; whether the notifier runs.
bool changefeed_notifier_ensure(void);
// In-transaction NOTIFY changefeed_<collection_id> (without preloading).
void changefeed_notify_collection(int32 collection_id);

// The database's position key (extension/position_key.cpp), from
// changefeed.position_key; cached per backend; raises an error if it cannot be
// read.
const uint8 *changefeed_position_key(void);

// Positions' history (extension/position_history.cpp).
struct ChangefeedWalPoint;
// Where this server is in its WAL history now: what a position encoded now
// carries.
ChangefeedWalPoint changefeed_wal_point(void);
// Raises the error a position encoded at `at` gets on this server, if any
// (CF017 another history, CF016 not replayed by this standby yet).
void changefeed_check_history(ChangefeedWalPoint at);

// A database's background workers; notifier.cpp keeps their shared slot and
// starts and stops them together.
enum WorkerKind { kNotifier = 0, kMaintainer = 1, kWorkerKinds = 2 };
// In a worker: connects to `database` and claims the worker's place; false
// when another worker of that kind serves the database (then exit).
bool changefeed_worker_attach(Oid database, int kind);
// In a worker: whether it was asked to exit (DROP DATABASE).
bool changefeed_worker_exit_requested(void);

// Maintenance (extension/maintainer.cpp).
// SET LOCAL lock_timeout = changefeed.maintenance_lock_timeout.
void changefeed_set_local_lock_timeout(void);

// In a worker (worker_transaction.cpp): runs body(arg) in a transaction of its
// own with the maintenance lock timeout, `activity` shown in pg_stat_activity.
// An error is logged as a WARNING "<what> failed: <error>" with `retry` as
// detail, and the transaction aborted; the worker goes on.  Returns whether
// the work committed.
bool changefeed_worker_transaction(const char *activity, const char *what, const char *retry,
                                   void (*body)(void *), void *arg);

// TTL sweeper (extension/ttl.cpp): whether deletes of `collection_id` made now
// in this backend are TTL expiry (a sweep of that collection is running, or a
// superuser set changefeed.delete_reason = 'ttl').
bool changefeed_ttl_sweep_active(int32 collection_id);

// FNV-1a (32 bit) of the partition key's bytes; range = hash % ranges.
extern "C" uint32 changefeed_range_hash(const char *bytes, size_t len);
