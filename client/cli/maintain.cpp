// changefeed maintain: one run of changefeed.maintain() (partitions ahead,
// retention, TTL); exit 9 when a step failed.
#include "commands.hpp"
#include "exit_codes.hpp"

#include <iostream>

namespace changefeed::cli {
namespace {

int run(const ConnectOptions& connect) {
    Connection c(connect);
    auto r = c.exec("SELECT partitions_created, partitions_dropped, ttl_deleted, "
                    "array_to_string(failed_steps, '; '), cardinality(failed_steps) FROM changefeed.maintain()");
    std::cout << "partitions created: " << r.get(0, 0) << "\npartitions dropped: " << r.get(0, 1)
              << "\nrows expired (TTL): " << r.get(0, 2) << '\n';
    if (r.get(0, 4) != "0") {
        std::cout << "failed steps: " << r.get(0, 3) << " (retried at the next run; see the server log)\n";
        return exit_check_failed;
    }
    return exit_ok;
}

}  // namespace

void add_maintain(Wiring w) {
    auto* sub = w.app.add_subcommand("maintain", "run changefeed.maintain() once: partitions ahead, retention, TTL "
                                                 "(exit 9 when a step failed)");
    sub->callback([w] { w.action = [&c = w.connect] { return run(c); }; });
}

}  // namespace changefeed::cli
