// Capture-side transaction tracking: which collections the current
// transaction captured rows of, and how many rows.
//
// Capture notes each collection it writes to (changefeed_note_capture).  At
// commit the notes go to this database's notifier (notifier.cpp) through
// shared memory; an aborted transaction or subtransaction forgets its own.
// Without the library preloaded there is no notifier: capture sends an
// in-transaction NOTIFY instead, once per transaction and collection.
#include "pg.hpp"
#include "capture/xact_tracking.hpp"
#include "settings.hpp"
#include "wake/notifier.hpp"

namespace {

constexpr int kTouched = 64;  // collections noted per transaction before "all"

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
            if (changefeed::preloaded) {
                int32 ids[kTouched];
                for (int i = 0; i < ntouched; i++) ids[i] = touched[i].collection_id;
                changefeed_notifier_publish(ids, ntouched, touched_overflow, xact_rows);
            }
            forget_touched();
            break;
        case XACT_EVENT_ABORT:
        case XACT_EVENT_PARALLEL_ABORT:
        case XACT_EVENT_PREPARE:  // COMMIT PREPARED wakes no one; consumers' polling covers it
            forget_touched();
            break;
        default: break;
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

}  // namespace

void changefeed_xact_tracking_init(void) {
    RegisterXactCallback(on_xact, NULL);
    RegisterSubXactCallback(on_subxact, NULL);
}

void changefeed_note_capture(int32 collection_id) {
    xact_rows++;
    for (int i = 0; i < ntouched; i++)
        if (touched[i].collection_id == collection_id) return;
    if (ntouched == 0 && changefeed::preloaded) changefeed_notifier_ensure();
    if (ntouched < kTouched)
        touched[ntouched++] = Touched{collection_id, GetCurrentTransactionNestLevel()};
    else
        touched_overflow = true;
    if (!changefeed::preloaded) changefeed_notify_collection(collection_id);
}

bool changefeed_xact_captured(void) {
    return ntouched > 0 || touched_overflow;
}
