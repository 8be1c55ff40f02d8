// What capture and partition retention ask of the capture guard
// (extension/guard/guard.cpp).  Include after pg.hpp.
#pragma once

// Whether the extension's own DDL (enable, disable, alter) has suspended the
// guard in this backend.
bool changefeed_guard_is_suspended(void);

// Capture logged the clear of a TRUNCATE of a partitioned table's root: the
// mark that let its partitions' guards through is taken down.
void changefeed_truncate_done(void);
