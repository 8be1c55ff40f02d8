// Internal: which feed a processor reads, and the settings both providers
// take from the per-feed option types.  Users choose the feed by the options'
// type (LatestVersionOptions, AllVersionsOptions), never by this value.
#pragma once

#include <changefeed/processor_options.hpp>

#include <functional>
#include <stop_token>
#include <utility>
#include <variant>

namespace changefeed::detail {

enum class FeedMode {
    latest_version,            // the current version of each changed document; no deletes
    all_versions_and_deletes,  // every write, deletes and clears included
    all_versions_and_schema,   // the same and the table's schema changes (AllVersionsOptions::schema_changes)
};

// The mode as changefeed.read() takes it.
inline const char* read_mode(FeedMode mode) noexcept {
    switch (mode) {
    case FeedMode::latest_version: return "latest";
    case FeedMode::all_versions_and_deletes: return "all";
    case FeedMode::all_versions_and_schema: return "all_with_schema";
    }
    return "all";
}

// The options of either feed, with the feed they were given for.
struct FeedSettings {
    ProcessorOptions common;
    FeedMode mode = FeedMode::latest_version;
    bool start_from_beginning = false;  // latest-version feed only
    bool resync = false;                // latest-version feed only
    // Set by the library's own runners whose handler returns before its work
    // is confirmed (the bridge's pipelined publishing): called on the worker
    // thread before checkpoints of handled batches are stored; it returns
    // once everything handed over is confirmed (true), or false when it
    // cannot be (stopping): then nothing is stored and the ranges resume
    // from their stored checkpoints.
    std::function<bool(std::stop_token)> before_checkpoint;

    static FeedSettings of(const FeedOptions& options) {
        FeedSettings s;
        if (const auto* o = std::get_if<LatestVersionOptions>(&options.feed())) {
            s.common = *o;
            s.start_from_beginning = o->start_from_beginning;
            s.resync = o->resync;
        } else {
            const auto& all = std::get<AllVersionsOptions>(options.feed());
            s.common = all;
            s.mode = all.schema_changes ? FeedMode::all_versions_and_schema : FeedMode::all_versions_and_deletes;
        }
        return s;
    }
};

}  // namespace changefeed::detail
