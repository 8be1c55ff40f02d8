// Internal: what a Processor runs on -- the PostgreSQL implementation
// (processor.cpp) or the in-memory one (in_memory.cpp).
#pragma once

#include <changefeed/projection.hpp>
#include <changefeed/recovery.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace changefeed::detail {

struct ProcessorImpl {
    virtual ~ProcessorImpl() = default;
    virtual void start() = 0;
    virtual void stop() = 0;
    virtual State current_state() const = 0;
    virtual const std::string& processor_name() const = 0;
    virtual const std::string& instance_name() const = 0;
    virtual std::vector<int> owned_ranges() const = 0;
    // A projector processor's counters since its start; zero for other shapes.
    virtual ProjectionStats projection_stats() const { return {}; }
    // Processor::wait_for and wait_until_caught_up (processor.hpp).
    virtual void wait_for(const std::string& position, std::chrono::milliseconds timeout) const = 0;
    virtual std::string current_position() const = 0;
    // Whether the caller runs on the thread that calls the handler.
    virtual bool on_handler_thread() const = 0;
    // Destroyed from inside the handler: ask to stop and take `self` (this
    // very object); the handler's thread finishes the stop once the handler
    // returned, then frees it.
    virtual void dispose_from_handler(std::unique_ptr<ProcessorImpl> self) = 0;
};

}  // namespace changefeed::detail
