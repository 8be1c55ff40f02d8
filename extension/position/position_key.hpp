// The database's position key (extension/position/position_key.cpp).  Include after
// pg.hpp.
#pragma once

// From changefeed.position_key; cached per backend; raises an error if it
// cannot be read.
const uint8 *changefeed_position_key(void);
