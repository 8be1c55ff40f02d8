// Memory a reading backend keeps between reads (extension/read/read_memory.cpp).
// Include after pg.hpp.
#pragma once

// Load-time set-up: the transaction callback that resets what reads kept.
void changefeed_read_memory_init(void);

// Switches to the memory of one read's work and returns the context to
// switch back to; NULL (nothing switched) for a read within a read (a policy
// function that reads the feed), which keeps its caller's memory, and when
// nothing is kept.  Pair with changefeed_read_work_end().
MemoryContext changefeed_read_work_begin(void);
// The read's work memory emptied (kept for the next read), and `caller`
// current again.
void changefeed_read_work_end(MemoryContext caller);

// InitMaterializedSRF(fcinfo, 0), with the result set in memory kept between
// reads: the executor ends it after the read returns, and the transaction's
// end empties what is left.
void changefeed_read_materialize(FunctionCallInfo fcinfo);

// Large arrays of a read's page, kept between reads.
enum ChangefeedReadBuffer { kPageRowsBuffer, kPositionsBuffer, kSeqsBuffer, kReadBuffers };
// A buffer of at least `size` bytes: the kept one (grown when needed), or,
// when that one is in use, a new one in the current context.
void *changefeed_read_buffer_take(ChangefeedReadBuffer which, Size size);
// `buf` (taken as `which`) grown to `size` bytes, as repalloc_huge() does.
void *changefeed_read_buffer_grow(ChangefeedReadBuffer which, void *buf, Size size);
// Gives `buf` back: kept for the next read, or freed.
void changefeed_read_buffer_give_back(ChangefeedReadBuffer which, void *buf);
