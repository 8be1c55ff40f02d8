// Internal: which feed a processor reads.  Users choose it by the options'
// type (LatestVersionOptions, AllVersionsOptions), never by this value.
#pragma once

namespace changefeed::detail {

enum class FeedMode {
    latest_version,            // the current version of each changed document; no deletes
    all_versions_and_deletes,  // every write, deletes and clears included
};

}  // namespace changefeed::detail
