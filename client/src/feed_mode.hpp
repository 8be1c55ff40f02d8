// Internal: which feed a processor reads, and the settings both providers
// take from the per-feed option types.  Users choose the feed by the options'
// type (LatestVersionOptions, AllVersionsOptions), never by this value.
#pragma once

#include <changefeed/processor_options.hpp>

#include <utility>
#include <variant>

namespace changefeed::detail {

enum class FeedMode {
    latest_version,            // the current version of each changed document; no deletes
    all_versions_and_deletes,  // every write, deletes and clears included
};

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

}  // namespace changefeed::detail
