// Short intervals so that the suites run quickly: one set for the tests'
// processors and for the runners they start as processes.
#pragma once

#include <changefeed/changefeed.hpp>

#include <chrono>
#include <string>

namespace cftest {

// Sets the fast intervals on any options type that has them (processor,
// bridge, ...).
template <class O>
void set_fast_intervals(O& o) {
    using namespace std::chrono_literals;
    o.lease_duration = 2s;
    o.renew_interval = 500ms;
    o.acquire_interval = 300ms;
    o.poll_interval = 200ms;
    o.retry_delay = 100ms;
    o.reconnect_min = 50ms;
    o.reconnect_max = 500ms;
}

inline changefeed::ProcessorOptions fast_options(const std::string& instance) {
    changefeed::ProcessorOptions o;
    o.instance_name = instance;
    set_fast_intervals(o);
    return o;
}

}  // namespace cftest
