// Internal: a PostgreSQL processor built from FeedSettings, for the library's
// own runners that set what the public options cannot
// (FeedSettings::before_checkpoint: the bridge's pipelined publishing).
#pragma once

#include <changefeed/collection.hpp>
#include <changefeed/processor.hpp>

#include "read/feed_mode.hpp"

#include <chrono>
#include <string>

namespace changefeed::detail {

Processor make_pg_processor(Collection collection, std::string name, ProcessorHandler handler, FeedSettings feed);

// Returns once the processor stored as `stored_name` has checkpointed every
// change before `position` (Processor::wait_for and the free wait_for()).
void wait_for_checkpoints(const Collection& collection, const std::string& stored_name, const std::string& position,
                          std::chrono::milliseconds timeout);

}  // namespace changefeed::detail
