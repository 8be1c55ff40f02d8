// changefeed tail TABLE: follows a table's feed from a position of its own,
// woken by the collection's LISTEN channel (polling only as a fallback), and
// prints each change as text, JSON lines or CloudEvents.  It keeps no state on
// the server: the position it reached is printed to stderr at the end, for
// --from.
#include "commands.hpp"
#include "exit_codes.hpp"
#include "output.hpp"

#include <changefeed/bridge.hpp>

#include <boost/json.hpp>

#include <chrono>
#include <ctime>
#include <iostream>
#include <memory>

namespace changefeed::cli {
namespace {

struct TailOptions {
    std::string table;
    std::string from = "now";
    std::string filter;
    std::string filter_vars;
    std::string format = "text";
    std::string mode = "all";
    std::string tenant;
    long count = 0;
    double timeout = 0;
    double poll = 5;
};

// A timestamp in microseconds since the epoch as RFC 3339 UTC.
std::string rfc3339(long long micros) {
    std::time_t secs = static_cast<std::time_t>(micros / 1000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    char frac[16];
    std::snprintf(frac, sizeof frac, ".%06lldZ", micros % 1000000);
    return std::string(buf) + frac;
}

Operation operation_of(const std::string& op) { return operation_named(op).value_or(Operation::clear); }

class Printer {
public:
    Printer(const TailOptions& o, std::string database, std::string table) : format_(o.format) {
        if (format_ == "cloudevents" || format_ == "debezium") {
            mapper_ = format_ == "cloudevents" ? cloudevents_mapper(EnvelopeSource{database, table})
                                               : debezium_mapper(EnvelopeSource{database, table});
            context_.source = EnvelopeSource{database, table};
            context_.processor = "tail";
        }
    }

    void print(const Result& r, int i) {
        const auto micros = std::stoll(r.get(i, 9));
        if (format_ == "text") {
            std::string line = rfc3339(micros) + "  " + r.get(i, 3);
            line.append(8 - std::min<std::size_t>(7, r.get(i, 3).size()), ' ');
            if (!r.is_null(i, 4) && !r.get(i, 4).empty()) line += r.get(i, 4) + "  ";
            line += "range=" + r.get(i, 2);
            if (r.get(i, 8) == "t") line += "  ttl";
            if (!r.is_null(i, 6)) line += "  " + r.get(i, 6);
            else if (!r.is_null(i, 7)) line += "  previous=" + r.get(i, 7);
            std::cout << line << '\n';
            return;
        }
        Change ch;
        ch.seq = std::stoll(r.get(i, 0));
        ch.txid = std::stoull(r.get(i, 1));
        ch.range_id = std::stoi(r.get(i, 2));
        ch.operation = operation_of(r.get(i, 3));
        ch.doc_id = r.get(i, 4);
        ch.partition_key = r.get(i, 5);
        if (!r.is_null(i, 6)) ch.current_json = r.get(i, 6);
        if (!r.is_null(i, 7)) ch.previous_json = r.get(i, 7);
        if (!ch.current_json.empty()) ch.current = boost::json::parse(ch.current_json);
        if (!ch.previous_json.empty()) ch.previous = boost::json::parse(ch.previous_json);
        ch.ttl_expired = r.get(i, 8) == "t";
        ch.written_at = std::chrono::system_clock::time_point(std::chrono::microseconds(micros));
        if (!r.is_null(i, 10)) ch.tenant = r.get(i, 10);
        ch.event_id = r.get(i, 12);
        if (format_ == "json") {
            // The documents go out as PostgreSQL wrote them, numbers with
            // every digit: spliced between the fields before and after.
            boost::json::object head;
            head["event_id"] = ch.event_id;
            head["seq"] = ch.seq;
            head["txid"] = std::to_string(ch.txid);
            head["range_id"] = ch.range_id;
            head["operation"] = to_string(ch.operation);
            head["doc_id"] = ch.doc_id;
            head["partition_key"] = ch.partition_key;
            boost::json::object tail;
            tail["ttl_expired"] = ch.ttl_expired;
            tail["written_at"] = rfc3339(micros);
            if (ch.tenant) tail["tenant"] = *ch.tenant;
            tail["position"] = r.get(i, 11);
            std::string line = boost::json::serialize(head);
            line.pop_back();  // '}'
            line += ",\"current\":" + (ch.current_json.empty() ? std::string("null") : ch.current_json);
            line += ",\"previous\":" + (ch.previous_json.empty() ? std::string("null") : ch.previous_json);
            line += "," + boost::json::serialize(tail).substr(1);
            std::cout << line << '\n';
            return;
        }
        context_.range_id = ch.range_id;
        for (const auto& e : mapper_(ch, context_)) std::cout << e.body << '\n';
    }

private:
    std::string format_;
    Mapper mapper_;
    MapContext context_;
};

int run(const ConnectOptions& connect, const TailOptions& o) {
    using Clock = std::chrono::steady_clock;
    install_interrupt_handler();
    Connection c(connect);
    const int id = collection_id(c, o.table);
    auto info = c.exec("SELECT changefeed.channel_of($1::int), current_database(), n.nspname || '.' || r.relname"
                       "  FROM pg_catalog.pg_class r JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace"
                       " WHERE r.oid = $2::regclass",
                       {std::to_string(id), o.table});
    // Listen before taking the start position: a change committed in between
    // wakes us.  Through a transaction pooler: polled every --poll seconds.
    if (!c.transaction_pooler()) c.exec("LISTEN " + c.quote_identifier(info.get(0, 0)));
    std::string pos = *resolve_position(c, o.table, o.from, true, false);
    Printer printer(o, info.get(0, 1), info.get(0, 2));

    const auto deadline = o.timeout > 0
                              ? Clock::now() + std::chrono::milliseconds(static_cast<long long>(o.timeout * 1000))
                              : Clock::time_point::max();
    const auto poll = std::chrono::milliseconds(static_cast<long long>(o.poll * 1000));
    long printed = 0;
    int status = exit_ok;
    auto opt = [](const std::string& s) -> std::optional<std::string> {
        if (s.empty()) return std::nullopt;
        return s;
    };
    while (!interrupted()) {
        const long want = o.count > 0 ? std::min<long>(1000, o.count - printed) : 1000;
        // read() and current_position() in one snapshot: after an empty read
        // the position moves to it, so nothing committed later is skipped.
        c.exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
        Result r = c.exec(
            "SELECT seq, txid::text, range_id, operation, doc_id, partition_key, current::text, previous::text,"
            "       ttl_expired, (extract(epoch FROM written_at) * 1000000)::bigint, tenant, \"position\", event_id"
            "  FROM changefeed.read($1::regclass, $2, $3::int, NULL, $4, $5::jsonpath, $6::jsonb, NULL, $7)",
            {o.table, pos, std::to_string(want), o.mode, opt(o.filter), opt(o.filter_vars), opt(o.tenant)});
        if (r.rows() == 0) pos = c.exec("SELECT changefeed.current_position()").get(0, 0);
        c.exec("COMMIT");
        for (int i = 0; i < r.rows(); ++i) {
            printer.print(r, i);
            pos = r.get(i, 11);
            ++printed;
        }
        std::cout.flush();
        if (o.count > 0 && printed >= o.count) break;
        if (r.rows() >= want) continue;  // more is waiting
        const auto now = Clock::now();
        if (now >= deadline) {
            if (o.count > 0) {
                std::cerr << "changefeed: timed out after " << printed << " of " << o.count << " changes\n";
                status = exit_timeout;
            }
            break;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
        c.wait_for_notification(std::min(poll, left));
    }
    std::cerr << "position: " << pos << '\n';
    return status;
}

}  // namespace

void add_tail(Wiring w) {
    auto o = std::make_shared<TailOptions>();
    auto* sub = w.app.add_subcommand("tail", "follow a table's changes (woken by LISTEN, no state kept on the server)");
    sub->add_option("table", o->table, "the enabled table, e.g. public.orders")->required();
    sub->add_option("--from", o->from,
                    "where to start: now (default), beginning (every change the log still holds), "
                    "a time (e.g. '2026-11-30 10:00+00') or a position (cf2....)");
    sub->add_option("--filter", o->filter, "a jsonpath predicate over the document, e.g. '$.status == \"open\"'");
    sub->add_option("--filter-vars", o->filter_vars,
                    "the filter's variables as a JSON object, e.g. '{\"s\": \"open\"}'");
    sub->add_option("--format", o->format,
                    "text (default), json (one object per line), cloudevents or debezium (one envelope per line)")
        ->check(CLI::IsMember({"text", "json", "cloudevents", "debezium"}));
    sub->add_option("--mode", o->mode,
                    "all (every version, default), all_with_schema (and the table's schema changes) or latest "
                    "(per window, the latest version)")
        ->check(CLI::IsMember({"all", "all_with_schema", "latest"}));
    sub->add_option("--tenant", o->tenant, "only this tenant's changes");
    sub->add_option("--count", o->count, "stop after this many changes (exit 7 if --timeout comes first)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--timeout", o->timeout, "stop after this many seconds")->check(CLI::PositiveNumber);
    sub->add_option("--poll", o->poll, "fallback read interval in seconds when no notification comes (default 5)")
        ->check(CLI::PositiveNumber);
    sub->callback([w, o] { w.action = [&c = w.connect, o] { return run(c, *o); }; });
}

}  // namespace changefeed::cli
