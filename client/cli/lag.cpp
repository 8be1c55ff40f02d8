// changefeed lag TABLE PROCESSOR: changefeed.lag() per range, with a warning
// for each range whose oldest pending change has used more than a share of the
// retention; --watch redraws it (in place on a terminal).
#include "commands.hpp"
#include "exit_codes.hpp"
#include "output.hpp"

#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>
#include <sstream>
#include <thread>

namespace changefeed::cli {
namespace {

struct LagOptions {
    std::string table;
    std::string processor;
    std::string warn = "50%";
    int count_limit = 10000;
    double watch = 0;  // seconds between redraws; 0 = once
    double timeout = 0;
};

// One report; its exit code (6 history lost, 9 over the warning share, 0).
int report(Connection& c, const LagOptions& o, double warn, std::ostream& out) {
    auto r = c.exec("SELECT range_id, coalesce(owner, '-'), live, epoch, extract(epoch FROM checkpoint_age), pending,"
                    "       pending_exact, extract(epoch FROM now() - oldest_pending), retention_used, history_lost"
                    "  FROM changefeed.lag($1::regclass, $2, $3::int)",
                    {o.table, o.processor, std::to_string(o.count_limit)});
    Table t({"range", "owner", "live", "epoch", "checkpoint_age", "pending", "oldest_pending", "retention_used"});
    long long total = 0;
    bool total_exact = true;
    int live = 0;
    std::vector<std::string> warnings;
    int status = exit_ok;
    for (int i = 0; i < r.rows(); ++i) {
        const bool lost = r.get(i, 9) == "t";
        const double used = std::stod(r.get(i, 8));
        std::string pending = "-";
        if (!r.is_null(i, 5)) {
            total += std::stoll(r.get(i, 5));
            pending = human_count(std::stoll(r.get(i, 5)));
            if (r.get(i, 6) != "t") {
                pending = ">=" + pending;
                total_exact = false;
            }
        }
        live += r.get(i, 2) == "t";
        t.add({r.get(i, 0), r.get(i, 1), r.get(i, 2) == "t" ? "yes" : "no", r.get(i, 3),
               human_duration(std::stod(r.get(i, 4))), lost ? "HISTORY LOST" : pending,
               r.is_null(i, 7) ? "-" : human_duration(std::stod(r.get(i, 7))) + " ago", percent(used)});
        if (lost) {
            warnings.push_back("range " + r.get(i, 0) +
                               ": HISTORY LOST: retention dropped changes after its checkpoint "
                               "(docs/runbooks/history-lost.md)");
            status = exit_history_lost;
        } else if (used > warn) {
            warnings.push_back("range " + r.get(i, 0) + ": the oldest pending change has used " + percent(used) +
                               " of the retention (warning above " + percent(warn) + ")");
            if (status == exit_ok) status = exit_check_failed;
        }
    }
    out << "lag of processor \"" << o.processor << "\" on " << o.table << ": " << (total_exact ? "" : ">=")
        << human_count(total) << " pending, " << live << " of " << r.rows() << " ranges with a live lease\n";
    t.print(out);
    for (const auto& w : warnings) out << "WARNING: " << w << '\n';
    return status;
}

int run(const ConnectOptions& connect, const LagOptions& o) {
    const double warn = parse_share(o.warn);
    Connection c(connect);
    if (o.watch <= 0) return report(c, o, warn, std::cout);
    install_interrupt_handler();
    using Clock = std::chrono::steady_clock;
    const auto deadline = o.timeout > 0
                              ? Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.timeout * 1000))
                              : Clock::time_point::max();
    const bool terminal = stdout_is_terminal();
    int status = exit_ok;
    while (true) {
        std::ostringstream frame;
        std::time_t now = std::time(nullptr);
        char stamp[32];
        std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", std::localtime(&now));
        frame << stamp << "  (every " << o.watch << "s";
        frame << (terminal ? ", Ctrl-C to stop)\n" : ")\n");
        status = report(c, o, warn, frame);
        // On a terminal the screen is redrawn; otherwise frames follow each other.
        if (terminal) std::cout << "\x1b[H\x1b[2J";
        std::cout << frame.str() << (terminal ? "" : "\n");
        std::cout.flush();
        const auto next = Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.watch * 1000));
        while (Clock::now() < next && Clock::now() < deadline && !interrupted())
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (Clock::now() >= deadline || interrupted()) break;
    }
    return status;
}

}  // namespace

void add_lag(Wiring w) {
    auto o = std::make_shared<LagOptions>();
    auto* sub = w.app.add_subcommand("lag", "a processor's lag per range, with a warning over a share of the retention "
                                            "(exit 9 over it, 6 when history is lost)");
    add_processor_arguments(*sub, o->table, o->processor);
    sub->add_option("--warn", o->warn,
                    "warn when a range's oldest pending change has used more than this share "
                    "of the retention (default 50%)");
    sub->add_option("--count-limit", o->count_limit, "count pending changes up to this many per range (default 10000)")
        ->check(CLI::Range(1, 100000));
    sub->add_option("--watch", o->watch, "redraw every SECONDS (default 2) until interrupted")
        ->expected(0, 1)
        ->default_str("2");
    sub->add_option("--timeout", o->timeout, "with --watch: stop after this many seconds")->check(CLI::PositiveNumber);
    sub->callback([w, o, sub] {
        // --watch given without a value means every 2 seconds.
        if (sub->count("--watch") > 0 && o->watch <= 0) o->watch = 2;
        w.action = [&c = w.connect, o] { return run(c, *o); };
    });
}

}  // namespace changefeed::cli
