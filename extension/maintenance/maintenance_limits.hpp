// Maintenance steps bounded in time (extension/maintenance/maintenance_limits.cpp).
// Include after pg.hpp.
#pragma once

// begin arms changefeed.maintenance_statement_timeout for the step starting
// now; end lifts it (re-arming the statement's own timeout) and says whether
// the step ran past its bound.
void changefeed_step_timeout_begin_c(void);
bool changefeed_step_timeout_end_c(void);
