// Internal: what a Processor runs on -- the PostgreSQL implementation
// (processor.cpp) or the in-memory one (in_memory.cpp).
#pragma once

#include <changefeed/processor.hpp>

namespace changefeed {

struct Processor::Impl {
    virtual ~Impl() = default;
    virtual void start() = 0;
    virtual void stop() = 0;
    virtual State current_state() const = 0;
    virtual const std::string& processor_name() const = 0;
    virtual const std::string& instance_name() const = 0;
    virtual std::vector<int> owned_ranges() const = 0;
};

}  // namespace changefeed
