// The subcommands of the changefeed tool, one file each.  Each add_* declares
// its options on `app` and, when it is the one chosen, sets `action` to what
// main() runs (returning the exit code).
#pragma once

#include "connection.hpp"

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

namespace changefeed::cli {

using Action = std::function<int()>;

struct Wiring {
    CLI::App& app;
    const ConnectOptions& connect;
    Action& action;
};

void add_tail(Wiring w);        // tail.cpp
void add_status(Wiring w);      // status.cpp
void add_processors(Wiring w);  // processors.cpp
void add_lag(Wiring w);         // lag.cpp
void add_checkpoint(Wiring w);  // checkpoint.cpp (checkpoint, reset)
void add_backfill(Wiring w);    // backfill.cpp (backfill, resync)
void add_maintain(Wiring w);    // maintain.cpp

// Shared by the subcommands (common.cpp).

// The collection id of `table`: 42P01 if there is no such table, CF002 if it
// is not enabled (what changefeed.collection_of() raises).
int collection_id(Connection& c, const std::string& table);

// A start or checkpoint position from what the user wrote: "now", "beginning"
// (when `allow_beginning`: the oldest change the log still holds for the
// table), a position ("cf<version>." ...) or a time (anything timestamptz
// reads, through changefeed.position_at()).  "now" gives nullopt when
// `now_as_null`, for functions whose default is now.
std::optional<std::string> resolve_position(Connection& c, const std::string& table, const std::string& spec,
                                            bool allow_beginning, bool now_as_null);

// "{1,2,3}" for a list of range ids (nullopt = all ranges).
std::optional<std::string> int_array(const std::vector<int>& ids);

// The arguments of a subcommand about one processor: the enabled table and
// the processor name (a tenant's: <tenant>/<name>), both required.
void add_processor_arguments(CLI::App& sub, std::string& table, std::string& processor);

// A share given as 0.5 or "50%".
double parse_share(const std::string& text);

// Set by SIGINT/SIGTERM: loops that wait end cleanly.
bool interrupted();
void install_interrupt_handler();

}  // namespace changefeed::cli
