// The extension's settings (changefeed.*), all defined in settings.cpp, and
// whether the library was preloaded.
#pragma once

namespace changefeed {
// The library was loaded through shared_preload_libraries (set by _PG_init):
// commits then wake readers through shared memory and the notifier.
extern bool preloaded;
}  // namespace changefeed

// Defines every changefeed.* setting, then reserves the prefix.  Called once,
// from _PG_init.
void changefeed_define_settings(void);

// changefeed.tick_rows / tick_interval: the notifier records a tick after this
// many captured rows, or this many milliseconds after the first row since the
// last tick.
extern int changefeed_tick_rows;
extern int changefeed_tick_interval;
// changefeed.notify_interval: the notifier sends wake-ups at most once per
// this many milliseconds, fractions allowed (0: after every commit it sees).
extern double changefeed_notify_interval;
// changefeed.maintain_interval: seconds between maintenance rounds (0: never).
extern int changefeed_maintain_interval;
// changefeed.maintenance_lock_timeout: how long a maintenance step waits for a
// lock (ms, 0: no limit).
extern int changefeed_maintenance_lock_timeout;
// changefeed.maintenance_statement_timeout: how long one maintenance step
// (a TTL sweep, a partition drop, ...) may run before it is cancelled and
// retried next round (ms, 0: no limit).
extern int changefeed_maintenance_statement_timeout;
// changefeed.max_retention: the longest retention a collection may have and
// the longest the log is kept for any (seconds).
extern int changefeed_max_retention;
// changefeed.delete_reason: 'ttl' (SET LOCAL) marks the deletes of this
// transaction as time-to-live expiry.
extern char *changefeed_delete_reason;
// changefeed.publication_guard: refuse publications that would ship the
// extension's own tables (read in SQL, guard/publications.sql).
extern bool changefeed_publication_guard;
// changefeed.read_position: set by read() (SET LOCAL) to the position after the
// last change it returned.
extern char *changefeed_read_position;

// changefeed.read_memory_kept: memory a reading backend keeps between reads
// (kB, 0: none; read_memory.cpp).
extern int changefeed_read_memory_kept;

// changefeed.max_processors_per_role: processor names one role may claim per
// collection (read by the SQL, check_processor_cap).
extern int changefeed_max_processors_per_role;
