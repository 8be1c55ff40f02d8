// Maintenance (extension/maintenance/maintainer.cpp).  Include after pg.hpp.
#pragma once

// SET LOCAL lock_timeout = changefeed.maintenance_lock_timeout.
void changefeed_set_local_lock_timeout(void);
