// The positions' SQL entry points (extension/position/position.cpp) that other
// C code calls too.  Include after pg.hpp.
#pragma once

extern "C" {
// position_decode()'s (lo, hi, last_seq) of a position that is not null,
// with its errors; hi null between windows.
void changefeed_decode_position(Datum pos, Datum values[3], bool nulls[3]);

// snapshot_now() -> pg_snapshot: the statement's snapshot with this
// transaction among the in-progress ones.
Datum changefeed_snapshot_now(PG_FUNCTION_ARGS);
}
