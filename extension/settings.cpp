// Every changefeed.* setting, defined in one place, and how the library was
// loaded.
#include "pg.hpp"
#include "settings.hpp"

namespace changefeed {
bool preloaded = false;
}  // namespace changefeed

int changefeed_tick_rows = 1000;
int changefeed_tick_interval = 1000;
double changefeed_notify_interval = 1.0;
int changefeed_maintain_interval = 300;
int changefeed_maintenance_lock_timeout = 1000;
int changefeed_maintenance_statement_timeout = 5000;
int changefeed_max_retention = 365 * 24 * 3600;
// Superuser only: a writer must not be able to pass its own deletes off as
// expiry.  The TTL sweeper (ttl.cpp) marks its deletes without it.
char *changefeed_delete_reason = NULL;
char *changefeed_read_position = NULL;
int changefeed_read_memory_kept = 16 * 1024;
int changefeed_max_processors_per_role = 100;
bool changefeed_publication_guard = true;

void changefeed_define_settings(void) {
    DefineCustomStringVariable("changefeed.delete_reason",
                               "Why rows are deleted: 'ttl' marks captured deletes as expired.", NULL,
                               &changefeed_delete_reason, "", PGC_SUSET, 0, NULL, NULL, NULL);
    DefineCustomIntVariable("changefeed.tick_rows", "Captured rows after which the background worker records a tick.",
                            NULL, &changefeed_tick_rows, 1000, 100, 10000000, PGC_SIGHUP, 0, NULL, NULL, NULL);
    DefineCustomIntVariable("changefeed.tick_interval", "Longest time between a captured commit and the next tick.",
                            NULL, &changefeed_tick_interval, 1000, 10, 3600000, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL,
                            NULL);
    DefineCustomRealVariable("changefeed.notify_interval",
                             "Shortest time between two wake-ups the notifier sends (0: none).", NULL,
                             &changefeed_notify_interval, 1.0, 0.0, 1000.0, PGC_SIGHUP, GUC_UNIT_MS, NULL, NULL, NULL);
    DefineCustomIntVariable("changefeed.maintain_interval",
                            "Seconds between the maintenance worker's rounds (0 disables).", NULL,
                            &changefeed_maintain_interval, 300, 0, 7 * 24 * 3600, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL,
                            NULL);
    DefineCustomIntVariable("changefeed.maintenance_lock_timeout",
                            "How long each maintenance step waits for a lock before it gives up until "
                            "the next round (0: no limit).",
                            NULL, &changefeed_maintenance_lock_timeout, 1000, 0, INT_MAX, PGC_SUSET, GUC_UNIT_MS, NULL,
                            NULL, NULL);
    // Superuser only: a step's owner-controlled code (a trigger fired by the
    // TTL delete) must not be able to lift the bound it runs under.
    DefineCustomIntVariable("changefeed.maintenance_statement_timeout",
                            "How long each maintenance step may run before it is cancelled and retried "
                            "on the next round (0: no limit).",
                            NULL, &changefeed_maintenance_statement_timeout, 5000, 0, INT_MAX, PGC_SUSET, GUC_UNIT_MS,
                            NULL, NULL, NULL);
    // Set by the server's administrator: one table owner's retention must not
    // keep the shared log for everyone.
    DefineCustomIntVariable("changefeed.max_retention",
                            "The longest retention a collection may have; the log is never kept longer.", NULL,
                            &changefeed_max_retention, 365 * 24 * 3600, 60, INT_MAX, PGC_SIGHUP, GUC_UNIT_S, NULL, NULL,
                            NULL);
    // Where a read stopped.  The 0.2 release's read_ranges() resumed there;
    // read_ranges() now takes it from the rows (read_window.cpp), but the 0.2
    // SQL sets it, and an undefined changefeed.* name would be an error.
    DefineCustomStringVariable("changefeed.read_position",
                               "The position after the last change the transaction's latest read() "
                               "returned (set by read(); internal).",
                               NULL, &changefeed_read_position, "", PGC_USERSET,
                               GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE | GUC_NO_RESET_ALL | GUC_DISALLOW_IN_FILE, NULL,
                               NULL, NULL);
    // Set by the server's administrator: memory every reading backend may hold
    // on to (read_memory.cpp).
    DefineCustomIntVariable("changefeed.read_memory_kept",
                            "Memory a backend that reads the change feed keeps between reads for the next "
                            "(0: none).",
                            NULL, &changefeed_read_memory_kept, 16 * 1024, 0, 256 * 1024, PGC_SUSET, GUC_UNIT_KB, NULL,
                            NULL, NULL);
    // Set by the server's administrator (for one role: ALTER ROLE ... SET): a
    // role that may read a table must not claim processor names without end
    // (access/access.sql, check_processor_cap).
    DefineCustomIntVariable("changefeed.max_processors_per_role",
                            "The most processor names one role may claim on one table.", NULL,
                            &changefeed_max_processors_per_role, 100, 1, 1000000, PGC_SUSET, 0, NULL, NULL, NULL);
    // Superuser only, as FOR ALL TABLES itself: a publication that ships the
    // extension's tables is a decision for whoever may make one
    // (guard/publications.sql reads it).
    DefineCustomBoolVariable("changefeed.publication_guard",
                             "Refuse publications that would ship changefeed's own tables.", NULL,
                             &changefeed_publication_guard, true, PGC_SUSET, 0, NULL, NULL, NULL);
    // Last: reserving the prefix drops every changefeed.* placeholder not yet
    // defined, which would discard the values postgresql.conf gave them.
    MarkGUCPrefixReserved("changefeed");
}
