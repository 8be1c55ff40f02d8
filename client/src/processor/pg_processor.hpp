// Internal: a PostgreSQL processor built from FeedSettings, for the library's
// own runners that set what the public options cannot
// (FeedSettings::before_checkpoint: the bridge's pipelined publishing).
#pragma once

#include <changefeed/collection.hpp>
#include <changefeed/processor.hpp>

#include "read/feed_mode.hpp"

#include <string>

namespace changefeed::detail {

Processor make_pg_processor(Collection collection, std::string name, ProcessorHandler handler, FeedSettings feed);

}  // namespace changefeed::detail
