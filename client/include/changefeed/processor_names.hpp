// The names of processors and instances as the server files them.
#pragma once

#include <string>

namespace changefeed {

// The name a processor's leases are filed under on the server: `name`, or
// with a tenant "<tenant>/<name>" ('%' and '/' in the tenant percent-encoded,
// so two tenants never share a lease set).  What changefeed.lag(),
// reset_checkpoint() and drop_processor() take.
std::string stored_processor_name(const std::string& name, const std::string& tenant = {});

// This host's name (cut to 150 characters).  A processor given no instance
// name is "<host>-<n>" from start() on: n is the lowest slot that no other
// live instance of the processor holds, in this process or another.  So each
// process (and each processor object) has its own name, and a process that
// died and is started again gets its slot back and takes its ranges at once,
// without waiting for its leases to expire.  Before start() the name is the
// host's alone.
std::string default_instance_name();

}  // namespace changefeed
