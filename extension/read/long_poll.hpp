// Whether and how long read_ranges() waits (long_poll.cpp).  In: the call's
// `wait`, and the transaction and statement the call runs in.  Out: the
// wait in milliseconds; the error where a read may not wait; this backend's
// xmin let go while it waits.  read_ranges() (read_window.cpp) runs the
// wait: it reads, and sleeps until a commit of the collection wakes it
// (notifier.hpp).
#pragma once
#include "pg.hpp"

namespace changefeed::read {

// read_ranges()'s `wait` in milliseconds; 0 for none (null or zero).
long wait_ms_of(FunctionCallInfo fcinfo, int n);

// Where a read cannot wait: no commit would wake it, or it would hold back
// vacuum while it waits.
void check_can_wait(FunctionCallInfo fcinfo);

// Lets go of this backend's xmin while it waits, as SnapshotResetXmin()
// does once no snapshot is left: the statement's snapshot is not used again
// (each read after the wait pushes a new one, and GetSnapshotData() sets the
// xmin again).  The catalog snapshot goes first, or it would be reused.
void release_xmin(void);

}  // namespace changefeed::read
