// changefeed status: the collections the role may see with their options, the
// log's partitions and how much of each collection's retention the log spans,
// the background workers, and changefeed.verify() (admins only).
#include "commands.hpp"
#include "exit_codes.hpp"
#include "output.hpp"

#include <iostream>
#include <memory>

namespace changefeed::cli {
namespace {

std::string yes_no(const std::string& b) { return b == "t" ? "yes" : "no"; }

int run(const ConnectOptions& connect) {
    Connection c(connect);
    int status = exit_ok;

    auto cols = c.exec(
        "SELECT c.table_name::text, c.id, c.ranges, c.retention::text, c.keep_previous,"
        "       array_to_string(c.partition_key, ','), coalesce(c.tenant_column, '-'), coalesce(c.ttl_column, '-'),"
        "       c.replicated, to_char(c.enabled_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS') || 'Z', c.channel,"
        "       h.dropped_before::text,"
        "       (SELECT extract(epoch FROM now() - greatest(min(lower_bound), c.enabled_at))"
        "                / extract(epoch FROM c.retention)"
        "          FROM (SELECT (regexp_match(pg_catalog.pg_get_expr(p.relpartbound, p.oid),"
        "                                     'FROM \\(''([^'']+)''\\)'))[1]::timestamptz AS lower_bound"
        "                  FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class p ON p.oid = i.inhrelid"
        "                 WHERE i.inhparent = 'changefeed.log'::regclass) b)"
        "  FROM changefeed.collections c"
        "  LEFT JOIN changefeed.horizons h ON h.collection_id = c.id"
        " ORDER BY c.id");
    std::cout << "Collections (" << cols.rows() << " visible to this role)\n";
    if (cols.rows() > 0) {
        Table t({"table", "id", "ranges", "retention", "keep_previous", "partition_key", "tenant", "ttl", "replicated",
                 "enabled_at", "channel", "retention_used", "dropped_before"});
        for (int i = 0; i < cols.rows(); ++i)
            t.add({cols.get(i, 0), cols.get(i, 1), cols.get(i, 2), cols.get(i, 3), yes_no(cols.get(i, 4)),
                   cols.get(i, 5), cols.get(i, 6), cols.get(i, 7), yes_no(cols.get(i, 8)), cols.get(i, 9),
                   cols.get(i, 10), cols.is_null(i, 12) ? "-" : percent(std::stod(cols.get(i, 12))),
                   cols.is_null(i, 11) ? "-" : cols.get(i, 11)});
        t.print(std::cout);
        std::cout << "(retention_used: the share of the retention the log's partitions span; over 100% means "
                     "maintenance has not dropped expired partitions yet)\n";
    }

    auto parts = c.exec("SELECT p.relname, CASE WHEN b.bound = 'DEFAULT' THEN 'default' ELSE"
                        "         (regexp_match(b.bound, 'FROM \\(''([^'']+)''\\)'))[1] || ' .. ' ||"
                        "         (regexp_match(b.bound, 'TO \\(''([^'']+)''\\)'))[1] END,"
                        "       pg_catalog.pg_size_pretty(pg_catalog.pg_total_relation_size(p.oid))"
                        "  FROM pg_catalog.pg_inherits i JOIN pg_catalog.pg_class p ON p.oid = i.inhrelid,"
                        "       LATERAL (SELECT pg_catalog.pg_get_expr(p.relpartbound, p.oid) AS bound) b"
                        " WHERE i.inhparent = 'changefeed.log'::regclass ORDER BY b.bound = 'DEFAULT', p.relname");
    std::cout << "\nLog partitions (" << parts.rows() << ")\n";
    Table pt({"partition", "written_at", "size"});
    for (int i = 0; i < parts.rows(); ++i) pt.add({parts.get(i, 0), parts.get(i, 1), parts.get(i, 2)});
    pt.print(std::cout);

    auto workers = c.exec(
        "SELECT changefeed.preloaded(), current_setting('changefeed.maintain_interval', true),"
        "       (SELECT string_agg(a.backend_type || ' (pid ' || a.pid || ')', ', ' ORDER BY a.backend_type)"
        "          FROM pg_catalog.pg_stat_activity a"
        "         WHERE a.backend_type LIKE 'changefeed %' AND a.datname = current_database())");
    std::cout << "\nBackground workers\n";
    std::cout << "library preloaded: " << yes_no(workers.get(0, 0)) << '\n';
    std::cout << "running here: " << (workers.is_null(0, 2) ? "none" : workers.get(0, 2)) << '\n';
    if (workers.get(0, 0) == "t" && workers.is_null(0, 2))
        std::cout << "(the notifier starts on the first captured write or enable(); changefeed.ensure_notifier() "
                     "starts it now)\n";
    if (workers.get(0, 0) != "t")
        std::cout << "(without preloading each writing transaction sends NOTIFY itself; schedule "
                     "changefeed.maintain() yourself)\n";
    else if (!workers.is_null(0, 1)) std::cout << "maintain_interval: " << workers.get(0, 1) << "s (0 = never)\n";

    std::cout << "\nCapture check: changefeed.verify()\n";
    try {
        auto v = c.exec("SELECT table_name::text, intact, array_to_string(problems, '; ') FROM changefeed.verify()");
        int broken = 0;
        for (int i = 0; i < v.rows(); ++i) {
            const bool intact = v.get(i, 1) == "t";
            std::cout << v.get(i, 0) << ": " << (intact ? "intact" : "NOT INTACT: " + v.get(i, 2)) << '\n';
            if (!intact) ++broken;
        }
        if (v.rows() == 0) std::cout << "no enabled tables\n";
        if (broken > 0) status = exit_check_failed;
    } catch (const DbError& e) {
        if (e.sqlstate != "42501") throw;
        std::cout << "skipped: only members of changefeed_admin may run verify()\n";
    }
    return status;
}

}  // namespace

void add_status(Wiring w) {
    auto* sub = w.app.add_subcommand("status",
                                     "collections and their options, log partitions, retention use, background "
                                     "workers, verify() (exit 9 when a table's capture is not intact)");
    sub->callback([w] { w.action = [&c = w.connect] { return run(c); }; });
}

}  // namespace changefeed::cli
