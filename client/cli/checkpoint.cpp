// changefeed checkpoint TABLE PROCESSOR --to ... and changefeed reset TABLE
// PROCESSOR: moving a processor's checkpoints, and forgetting it.  Both are for
// the processor's owning role or a changefeed_admin (the server refuses
// others: 42501).
#include "commands.hpp"
#include "exit_codes.hpp"
#include "output.hpp"

#include <iostream>
#include <memory>

namespace changefeed::cli {
namespace {

struct CheckpointOptions {
    std::string table;
    std::string processor;
    std::string to;
    std::vector<int> ranges;
};

int run_checkpoint(const ConnectOptions& connect, const CheckpointOptions& o) {
    Connection c(connect);
    // TIME goes through position_at(): CF006 if retention dropped what it needs.
    const auto pos = resolve_position(c, o.table, o.to, false, true);
    // reset_checkpoint() frees every moved lease with a new epoch: an instance
    // holding it can no longer checkpoint (CF010), re-acquires it and reads
    // from the new position.
    auto r = c.exec("SELECT changefeed.reset_checkpoint($1::regclass, $2, $3, $4::int[])",
                    {o.table, o.processor, pos, int_array(o.ranges)});
    std::string where = o.to == "now"         ? "now (the current position)"
                        : pos && *pos == o.to ? "the given position"
                                              : "the position at " + o.to;
    std::cout << "moved the checkpoints of " << r.get(0, 0) << " range(s) of processor \"" << o.processor << "\" on "
              << o.table << " to " << where << ".\n"
              << "Each lease was freed with a new epoch: running instances are fenced and read on from there.\n";
    return exit_ok;
}

struct ResetOptions {
    std::string table;
    std::string processor;
    bool yes = false;
};

int run_reset(const ConnectOptions& connect, const ResetOptions& o) {
    Connection c(connect);
    const int id = collection_id(c, o.table);
    // instances() refuses another role's processor (42501) before we look further.
    auto inst = c.exec("SELECT instance FROM changefeed.instances($1::regclass, $2) WHERE live",
                       {o.table, o.processor});
    auto leases = c.exec("SELECT count(*), count(*) FILTER (WHERE live),"
                         "       string_agg(DISTINCT owner, ', ') FILTER (WHERE live)"
                         "  FROM changefeed.leases WHERE collection_id = $1::int AND processor = $2",
                         {std::to_string(id), o.processor});
    const long ranges = std::stol(leases.get(0, 0));
    if (ranges == 0)
        throw DbError("processor \"" + o.processor + "\" has never run on " + o.table, "CF012", "",
                      "Leases are created when a processor first starts.");
    if (inst.rows() > 0 || std::stol(leases.get(0, 1)) > 0) {
        std::string who;
        for (int i = 0; i < inst.rows(); ++i) who += (i ? ", " : "") + inst.get(i, 0);
        if (who.empty()) who = leases.get(0, 2);
        throw CliError(exit_busy, "processor \"" + o.processor + "\" on " + o.table + " is running (live: " + who +
                                      "); stop every instance first, then reset it");
    }
    if (!o.yes) {
        std::cout << "reset would forget processor \"" << o.processor << "\" on " << o.table << ": its " << ranges
                  << " leases and checkpoints, its registered instances, its deduplication store and its owner.\n"
                  << "Its next start is then a FIRST start: it begins where that start's options say "
                     "(start_from_beginning, start_time or start_position), and by default at that moment's "
                     "current position, skipping everything written until then.\n"
                  << "Nothing was changed: run again with --yes to reset it.\n";
        return exit_usage;
    }
    c.exec("SELECT changefeed.drop_processor($1::regclass, $2)", {o.table, o.processor});
    std::cout << "forgot processor \"" << o.processor << "\" on " << o.table << ": " << ranges
              << " leases and checkpoints, its instances, its deduplication store and its owner.\n"
              << "Its next start is a first start: where its start options say, by default at that moment's "
                 "current position.\n";
    return exit_ok;
}

}  // namespace

void add_checkpoint(Wiring w) {
    auto o = std::make_shared<CheckpointOptions>();
    auto* sub = w.app.add_subcommand("checkpoint", "move a processor's checkpoints (owner or admin); running "
                                                   "instances are fenced and read on from there");
    add_processor_arguments(*sub, o->table, o->processor);
    sub->add_option("--to", o->to, "now, a time (through changefeed.position_at()) or a position (cf2....)")
        ->required();
    sub->add_option("--range", o->ranges, "only these ranges (repeat the option; default all)");
    sub->callback([w, o] { w.action = [&c = w.connect, o] { return run_checkpoint(c, *o); }; });

    auto r = std::make_shared<ResetOptions>();
    auto* reset = w.app.add_subcommand("reset", "forget a stopped processor: leases, checkpoints, instances, "
                                                "deduplication store (owner or admin; needs --yes)");
    add_processor_arguments(*reset, r->table, r->processor);
    reset->add_flag("--yes", r->yes, "really forget it (without it: say what would be forgotten, exit 2)");
    reset->callback([w, r] { w.action = [&c = w.connect, r] { return run_reset(c, *r); }; });
}

}  // namespace changefeed::cli
