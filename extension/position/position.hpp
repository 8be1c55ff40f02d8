// The positions' SQL entry points (extension/position/position.cpp) that other
// C code calls too.  Include after pg.hpp.
#pragma once

extern "C" {
// snapshot_now() -> pg_snapshot: the statement's snapshot with this
// transaction among the in-progress ones.
Datum changefeed_snapshot_now(PG_FUNCTION_ARGS);
}
