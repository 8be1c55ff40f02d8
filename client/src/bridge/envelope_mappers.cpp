// The bridge's ready mappers: CloudEvents 1.0 (JSON structured mode) and
// Debezium-compatible change events.  Both name the envelope after the
// change's event id, so every redelivery of a change publishes the same id.
// Documents go out as PostgreSQL wrote them, numbers with every digit.
#include <changefeed/bridge.hpp>
#include <changefeed/error.hpp>

#include "core/exact_json.hpp"
#include "core/time_text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <chrono>
#include <cstdio>

#ifndef CHANGEFEED_CLIENT_VERSION
#define CHANGEFEED_CLIENT_VERSION "unknown"
#endif

namespace changefeed {
namespace {

namespace json = boost::json;
using std::chrono::system_clock;

// The source of one change: the mapper's own where given, else the bridge's.
struct Source {
    std::string database;
    std::string qualified;  // "schema.table"
    std::string schema;
    std::string table;
};

void check_table(const std::string& table) {
    const auto dot = table.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == table.size())
        throw Error(errc::invalid_option,
                    "the envelope source's table must be \"schema.table\", got \"" + table + "\"");
}

EnvelopeSource checked(EnvelopeSource given) {
    if (!given.table.empty()) check_table(given.table);
    return given;
}

Source source_of(const EnvelopeSource& given, const MapContext& ctx) {
    Source s;
    s.database = given.database.empty() ? ctx.source.database : given.database;
    s.qualified = given.table.empty() ? ctx.source.table : given.table;
    if (s.database.empty() || s.qualified.empty())
        throw Error(errc::invalid_option,
                    "the envelope source is unknown: give the mapper an EnvelopeSource or run it in a Bridge");
    check_table(s.qualified);
    const auto dot = s.qualified.find('.');
    s.schema = s.qualified.substr(0, dot);
    s.table = s.qualified.substr(dot + 1);
    return s;
}

// One path segment of a URI reference (RFC 3986): every byte outside the
// unreserved set percent-encoded, so a name with a space, '#', '?' or '/'
// still gives one segment of its own and ordinary names stay as they are.
std::string path_segment(const std::string& s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (const unsigned char ch : s) {
        if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
            ch == '.' || ch == '_' || ch == '~') {
            out += static_cast<char>(ch);
        } else {
            out += '%';
            out += hex[ch >> 4];
            out += hex[ch & 0xF];
        }
    }
    return out;
}

std::int64_t epoch_ms(system_clock::time_point t) {
    return std::chrono::floor<std::chrono::milliseconds>(t).time_since_epoch().count();
}

Envelope envelope(const Change& c, const Source& s, const char* content_type, const json::object& body) {
    Envelope e;
    e.id = c.event_id;
    e.table = s.qualified;
    e.content_type = content_type;
    e.body = detail::serialize_exact(body, c);
    return e;
}

const char* debezium_op(const Change& c) {
    if (c.from_backfill) return "r";
    switch (c.operation) {
    case Operation::create: return "c";
    case Operation::replace: return "u";
    case Operation::delete_: return "d";
    case Operation::clear: return "t";
    case Operation::schema: break;  // not a change event (debezium_schema_change)
    }
    return "c";
}

// A schema change as Debezium's schema change topic carries it: "tableChanges"
// with the table's columns and key after the change ("ddl" is null: the feed
// records the shape, not the statement), and the change itself, as the feed
// describes it, under "changefeed".
json::object debezium_schema_change(const Change& c, const Source& s, json::object src) {
    const auto* change = c.current.if_object();
    json::array columns;
    json::array key;
    if (change) {
        if (const auto* cols = change->if_contains("columns"); cols && cols->is_array())
            for (const auto& col : cols->get_array()) {
                const auto* o = col.if_object();
                if (!o) continue;
                json::object out;
                out["name"] = o->contains("name") ? o->at("name") : json::value();
                out["typeName"] = o->contains("type") ? o->at("type") : json::value();
                out["position"] = o->contains("attnum") ? o->at("attnum") : json::value();
                columns.push_back(std::move(out));
            }
        if (const auto* k = change->if_contains("key"); k && k->is_array()) key = k->get_array();
    }
    json::object table;
    table["primaryKeyColumnNames"] = std::move(key);
    table["columns"] = std::move(columns);
    json::object tc;
    tc["type"] = "ALTER";
    tc["id"] = "\"" + s.database + "\".\"" + s.schema + "\".\"" + s.table + "\"";
    tc["table"] = std::move(table);
    json::object ev;
    ev["source"] = std::move(src);
    ev["ts_ms"] = epoch_ms(system_clock::now());
    ev["databaseName"] = s.database;
    ev["schemaName"] = s.schema;
    ev["ddl"] = nullptr;
    ev["tableChanges"] = json::array{std::move(tc)};
    ev["changefeed"] = c.current;
    return ev;
}

}  // namespace

Mapper cloudevents_mapper(EnvelopeSource source) {
    return [given = checked(std::move(source))](const Change& c, const MapContext& ctx) {
        const Source s = source_of(given, ctx);
        json::object ev;
        ev["specversion"] = "1.0";
        ev["id"] = c.event_id;
        ev["source"] = "/" + path_segment(s.database) + "/" + path_segment(s.qualified);
        ev["type"] = std::string("changefeed.") + to_string(c.operation);
        if (c.written_at) ev["time"] = detail::rfc3339_utc(*c.written_at, 6);
        // CloudEvents 1.0 forbids an empty subject: an empty key goes without one.
        if (c.operation != Operation::clear && !c.doc_id.empty()) ev["subject"] = c.doc_id;
        ev["datacontenttype"] = "application/json";
        ev["changefeedrange"] = c.range_id;
        ev["data"] = json::object{{"current", detail::current_slot(c)}, {"previous", detail::previous_slot(c)}};
        return std::vector<Envelope>{envelope(c, s, "application/cloudevents+json", ev)};
    };
}

Mapper debezium_mapper(EnvelopeSource source) {
    return [given = checked(std::move(source))](const Change& c, const MapContext& ctx) {
        // A TRUNCATE is logged as a clear in every range, a schema change too:
        // range 0's stands for it.
        if ((c.operation == Operation::clear || c.operation == Operation::schema) && c.range_id != 0)
            return std::vector<Envelope>{};
        const Source s = source_of(given, ctx);
        const auto now = system_clock::now();
        json::object src;
        src["version"] = CHANGEFEED_CLIENT_VERSION;
        src["connector"] = "changefeed";
        src["name"] = ctx.processor;
        src["ts_ms"] = epoch_ms(c.written_at ? *c.written_at : now);
        src["snapshot"] = c.from_backfill ? "true" : "false";
        src["db"] = s.database;
        if (c.from_backfill) src["sequence"] = nullptr;
        else src["sequence"] = "[null,\"" + std::to_string(c.seq) + "\"]";
        src["schema"] = s.schema;
        src["table"] = s.table;
        if (c.from_backfill) src["txId"] = nullptr;
        else src["txId"] = c.txid;
        if (c.operation == Operation::schema)
            return std::vector<Envelope>{
                envelope(c, s, "application/json", debezium_schema_change(c, s, std::move(src)))};
        json::object ev;
        ev["before"] = detail::previous_slot(c);
        ev["after"] = detail::current_slot(c);
        ev["source"] = std::move(src);
        ev["op"] = debezium_op(c);
        ev["ts_ms"] = epoch_ms(now);
        return std::vector<Envelope>{envelope(c, s, "application/json", ev)};
    };
}

}  // namespace changefeed
