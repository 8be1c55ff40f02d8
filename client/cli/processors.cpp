// changefeed processors TABLE: the processors of a table the role may see (its
// own; every one for an admin), with their leases per range and instances.
#include "commands.hpp"
#include "exit_codes.hpp"
#include "output.hpp"

#include <iostream>
#include <memory>

namespace changefeed::cli {
namespace {

int run(const ConnectOptions& connect, const std::string& table) {
    Connection c(connect);
    const int id = collection_id(c, table);
    auto l = c.exec("SELECT l.processor, coalesce(l.owner_role::text, '-'), l.range_id, coalesce(l.owner, '-'), l.live,"
                    "       l.epoch, extract(epoch FROM now() - l.updated_at), l.backfill_done, l.backfill_rows,"
                    "       CASE WHEN l.expires_at IS NULL THEN NULL ELSE extract(epoch FROM l.expires_at - now()) END"
                    "  FROM changefeed.leases l WHERE l.collection_id = $1::int ORDER BY l.processor, l.range_id",
                    {std::to_string(id)});
    if (l.rows() == 0) {
        std::cout << "no processors on " << table << " visible to this role\n";
        return exit_ok;
    }
    int i = 0;
    while (i < l.rows()) {
        const std::string name = l.get(i, 0);
        int live = 0, n = 0;
        Table t({"range", "instance", "live", "epoch", "checkpoint_age", "lease_left", "backfill"});
        for (; i < l.rows() && l.get(i, 0) == name; ++i, ++n) {
            const bool is_live = l.get(i, 4) == "t";
            live += is_live;
            std::string lease_left = "-";
            if (!l.is_null(i, 9)) {
                const double left = std::stod(l.get(i, 9));
                lease_left = left > 0 ? human_duration(left) : "expired";
            }
            t.add({l.get(i, 2), l.get(i, 3), is_live ? "yes" : "no", l.get(i, 5),
                   human_duration(std::stod(l.get(i, 6))), lease_left,
                   l.get(i, 7) == "t" ? "-" : "scanning (" + human_count(std::stoll(l.get(i, 8))) + " rows)"});
        }
        std::cout << "processor \"" << name << "\" (owner role " << l.get(i - 1, 1) << "): " << n << " ranges, " << live
                  << " with a live lease\n";
        auto inst = c.exec(
            "SELECT instance, live, extract(epoch FROM now() - registered_at) FROM changefeed.instances($1::regclass, $2)",
            {table, name});
        std::cout << "instances:";
        if (inst.rows() == 0) std::cout << " none registered";
        for (int k = 0; k < inst.rows(); ++k)
            std::cout << (k ? ", " : " ") << inst.get(k, 0) << " (" << (inst.get(k, 1) == "t" ? "live" : "gone")
                      << ", registered " << human_duration(std::stod(inst.get(k, 2))) << " ago)";
        std::cout << '\n';
        t.print(std::cout);
        std::cout << '\n';
    }
    std::cout << "(checkpoint_age: since the lease row last moved -- a checkpoint or a renewal)\n";
    return exit_ok;
}

}  // namespace

void add_processors(Wiring w) {
    auto table = std::make_shared<std::string>();
    auto* sub = w.app.add_subcommand("processors", "a table's processors: leases per range (owner role, instance, "
                                                   "live, epoch, checkpoint age) and instances");
    sub->add_option("table", *table, "the enabled table")->required();
    sub->callback([w, table] { w.action = [&c = w.connect, table] { return run(c, *table); }; });
}

}  // namespace changefeed::cli
