// Internal: what a Processor runs on -- the PostgreSQL implementation
// (processor.cpp) or the in-memory one (in_memory.cpp) -- and the feed
// settings both take from the per-feed option types.
#pragma once

#include <changefeed/processor.hpp>

#include "feed_mode.hpp"

#include <memory>

namespace changefeed::detail {

// The options of either feed, with the feed they were given for.
struct FeedSettings {
    ProcessorOptions common;
    FeedMode mode = FeedMode::latest_version;
    bool start_from_beginning = false;  // latest-version feed only
    bool resync = false;                // latest-version feed only

    static FeedSettings of(const FeedOptions& options) {
        if (const auto* o = std::get_if<LatestVersionOptions>(&options.feed()))
            return FeedSettings{*o, FeedMode::latest_version, o->start_from_beginning, o->resync};
        return FeedSettings{options.common(), FeedMode::all_versions_and_deletes};
    }
};

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
    // Whether the caller runs on the thread that calls the handler.
    virtual bool on_handler_thread() const = 0;
    // Destroyed from inside the handler: ask to stop and take `self` (this
    // very object); the handler's thread finishes the stop once the handler
    // returned, then frees it.
    virtual void dispose_from_handler(std::unique_ptr<ProcessorImpl> self) = 0;
};

// Lets the providers build a Processor around their implementation.
struct ProcessorAccess {
    static Processor make(std::unique_ptr<ProcessorImpl> impl) { return Processor(std::move(impl)); }
};

}  // namespace changefeed::detail
