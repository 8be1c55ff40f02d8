// Positions' history (extension/position/position_history.cpp).  Include after pg.hpp.
#pragma once

struct ChangefeedWalPoint;  // position_codec.hpp
// Where this server is in its WAL history now: what a position encoded now
// carries.
ChangefeedWalPoint changefeed_wal_point(void);
// Raises the error a position encoded at `at` gets on this server, if any
// (CF017 another history, CF016 not replayed by this standby yet).
void changefeed_check_history(ChangefeedWalPoint at);
