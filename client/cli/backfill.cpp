// changefeed resync TABLE PROCESSOR: restarts a processor's ranges as a
// backfill of the table's current rows (changefeed.resync_processor()).
// changefeed backfill TABLE [PROCESSOR]: follows the backfills in progress
// (start_from_beginning, resync) from the progress their instances store in
// the leases: rows, rate, ETA, as a bar on a terminal and plain lines otherwise.
#include "commands.hpp"
#include "exit_codes.hpp"
#include "output.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <thread>

namespace changefeed::cli {
namespace {

struct BackfillOptions {
    std::string table;
    std::string processor;  // empty: every processor the role may see
    double interval = 1;
    double timeout = 0;
};

struct Sample {
    std::map<std::pair<std::string, int>, std::pair<bool, long long>> ranges;  // (processor, range) -> (done, rows)
};

Sample sample(Connection& c, int id, const std::string& processor) {
    auto r = c.exec("SELECT processor, range_id, backfill_done, backfill_rows FROM changefeed.leases"
                    " WHERE collection_id = $1::int AND ($2::text IS NULL OR processor = $2)",
                    {std::to_string(id), processor.empty() ? std::nullopt : std::optional<std::string>(processor)});
    Sample s;
    for (int i = 0; i < r.rows(); ++i)
        s.ranges[{r.get(i, 0), std::stoi(r.get(i, 1))}] = {r.get(i, 2) == "t", std::stoll(r.get(i, 3))};
    return s;
}

std::string bar(double share, int width) {
    const int full = static_cast<int>(share * width + 0.5);
    std::string out = "[";
    for (int i = 0; i < width; ++i) out += i < full ? '#' : '.';
    return out + "]";
}

int watch(Connection& c, const BackfillOptions& o) {
    using Clock = std::chrono::steady_clock;
    install_interrupt_handler();
    const int id = collection_id(c, o.table);
    if (!o.processor.empty()) {
        // Another role's processor is refused here (42501), a missing one is CF012.
        c.exec("SELECT 1 FROM changefeed.instances($1::regclass, $2)", {o.table, o.processor});
        if (sample(c, id, o.processor).ranges.empty())
            throw DbError("processor \"" + o.processor + "\" has never run on " + o.table, "CF012");
    }
    const int ranges = std::stoi(c.exec("SELECT (changefeed.collection_of($1::regclass)).ranges", {o.table}).get(0, 0));
    // The ranges scanning now make up the backfill followed.
    Sample first = sample(c, id, o.processor);
    std::set<std::pair<std::string, int>> tracked;
    std::set<std::string> processors;
    for (const auto& [key, st] : first.ranges)
        if (!st.first) {
            tracked.insert(key);
            processors.insert(key.first);
        }
    const std::string what = "on " + o.table + (o.processor.empty() ? "" : " for processor \"" + o.processor + "\"");
    if (tracked.empty()) {
        std::cout << "no backfill in progress " << what << '\n';
        return exit_ok;
    }
    const long long estimate = std::stoll(
        c.exec("SELECT changefeed.estimated_rows($1::regclass)", {o.table}).get(0, 0));
    // Each processor's backfill scans the ranges it restarted: its share of the table.
    const long long total = std::max<long long>(1, estimate * static_cast<long long>(tracked.size()) / ranges);
    std::string names;
    for (const auto& p : processors) names += (names.empty() ? "" : ", ") + p;
    std::cout << "backfill " << what << ": " << tracked.size() << " range(s) of " << names << ", about "
              << human_count(total) << " rows\n";

    const bool terminal = stdout_is_terminal();
    const auto start = Clock::now();
    const auto deadline = o.timeout > 0 ? start + std::chrono::milliseconds(static_cast<long long>(o.timeout * 1000))
                                        : Clock::time_point::max();
    long long start_rows = -1;
    while (true) {
        Sample s = sample(c, id, o.processor);
        long long rows = 0;
        int left = 0;
        for (const auto& key : tracked) {
            auto it = s.ranges.find(key);
            if (it == s.ranges.end()) continue;  // forgotten (reset) meanwhile
            rows += it->second.second;
            left += !it->second.first;
        }
        if (start_rows < 0) start_rows = rows;
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        const double rate = elapsed > 0 ? (rows - start_rows) / elapsed : 0;
        const double share = std::min(1.0, static_cast<double>(rows) / static_cast<double>(std::max(total, rows)));
        std::string eta = "-";
        if (left == 0) eta = "0s";
        else if (rate > 0) eta = human_duration(std::max(0.0, (std::max(total, rows) - rows) / rate));
        char line[256];
        std::snprintf(line, sizeof line, "%s rows %s/~%s  %s rows/s  ETA %s  ranges left %d/%zu",
                      percent(share).c_str(), human_count(rows).c_str(), human_count(total).c_str(),
                      human_count(static_cast<long long>(rate)).c_str(), eta.c_str(), left, tracked.size());
        if (terminal) std::cout << "\r\x1b[2K" << bar(share, 30) << ' ' << line << std::flush;
        else std::cout << line << std::endl;
        if (left == 0) {
            if (terminal) std::cout << '\n';
            std::cout << "backfill done: " << human_count(rows) << " rows in " << human_duration(elapsed) << '\n';
            return exit_ok;
        }
        if (Clock::now() >= deadline || interrupted()) {
            if (terminal) std::cout << '\n';
            if (interrupted()) return exit_ok;
            std::cerr << "changefeed: timed out with " << left << " range(s) still scanning\n";
            return exit_timeout;
        }
        const auto next = Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.interval * 1000));
        while (Clock::now() < next && Clock::now() < deadline && !interrupted())
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

struct ResyncOptions {
    std::string table;
    std::string processor;
    std::vector<int> ranges;
    bool wait = false;
    double timeout = 0;
};

int run_resync(const ConnectOptions& connect, const ResyncOptions& o) {
    Connection c(connect);
    auto r = c.exec("SELECT changefeed.resync_processor($1::regclass, $2, $3::int[])",
                    {o.table, o.processor, int_array(o.ranges)});
    std::cout << r.get(0, 0) << " range(s) of processor \"" << o.processor << "\" on " << o.table
              << " restart as a backfill of the table's current rows, then read the log from now.\n"
              << "Each lease was freed with a new epoch: running instances are fenced and rescan.\n"
              << "(For latest-version processors: an all-versions processor would receive the rows as backfill "
                 "rows.)\n";
    std::cout.flush();
    if (!o.wait) return exit_ok;
    BackfillOptions b;
    b.table = o.table;
    b.processor = o.processor;
    b.timeout = o.timeout;
    return watch(c, b);
}

}  // namespace

void add_backfill(Wiring w) {
    auto o = std::make_shared<BackfillOptions>();
    auto* sub = w.app.add_subcommand("backfill", "follow the backfills in progress on a table (rows, rate, ETA) until "
                                                 "they are done (exit 7 at --timeout)");
    sub->add_option("table", o->table, "the enabled table")->required();
    sub->add_option("processor", o->processor, "only this processor (default: every one the role may see)");
    sub->add_option("--interval", o->interval, "seconds between updates (default 1)")->check(CLI::PositiveNumber);
    sub->add_option("--timeout", o->timeout, "give up after this many seconds")->check(CLI::PositiveNumber);
    sub->callback([w, o] {
        w.action = [&c = w.connect, o] {
            Connection conn(c);
            return watch(conn, *o);
        };
    });

    auto r = std::make_shared<ResyncOptions>();
    auto* resync = w.app.add_subcommand("resync", "restart a processor's ranges as a backfill of the table's current "
                                                  "rows (latest-version processors; owner or admin)");
    add_processor_arguments(*resync, r->table, r->processor);
    resync->add_option("--range", r->ranges, "only these ranges (repeat the option; default all)");
    resync->add_flag("--wait", r->wait, "then follow the backfill as `backfill` does");
    resync->add_option("--timeout", r->timeout, "with --wait: give up after this many seconds")
        ->check(CLI::PositiveNumber);
    resync->callback([w, r] { w.action = [&c = w.connect, r] { return run_resync(c, *r); }; });
}

}  // namespace changefeed::cli
