// A worker's unit of work (extension/wake/worker_transaction.cpp).  Include after
// pg.hpp.
#pragma once

// Runs body(arg) in a transaction of its own with the maintenance lock
// timeout, `activity` shown in pg_stat_activity.  An error is logged as a
// WARNING "<what> failed: <error>" with `retry` as detail, and the transaction
// aborted; the worker goes on.  Returns whether the work committed.
bool changefeed_worker_transaction(const char *activity, const char *what, const char *retry, void (*body)(void *),
                                   void *arg);
