// The names of processors and instances as the server files them.
#pragma once

#include <string>

namespace changefeed {

// The name a processor's leases are filed under on the server: `name`, or
// with a tenant "<tenant>/<name>" ('%' and '/' in the tenant percent-encoded,
// so two tenants never share a lease set).  What changefeed.lag(),
// reset_checkpoint() and drop_processor() take.
std::string stored_processor_name(const std::string& name, const std::string& tenant = {});

// "<host>-<pid>-<6 random hex digits>": the instance name used when none is
// given; a new one at each call, so every processor of a process has its own.
std::string default_instance_name();

}  // namespace changefeed
