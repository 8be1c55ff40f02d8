// The changefeed client library: include this for everything.
#pragma once

#include <changefeed/bridge.hpp>
#include <changefeed/change.hpp>
#include <changefeed/collection.hpp>
#include <changefeed/error.hpp>
#include <changefeed/filter.hpp>
#include <changefeed/history.hpp>
#include <changefeed/in_memory.hpp>
#include <changefeed/lag.hpp>
#include <changefeed/log.hpp>
#include <changefeed/metrics.hpp>
#include <changefeed/processor.hpp>
#include <changefeed/subscription.hpp>
