// The table as of a position and the net change between two, on PostgreSQL:
// changefeed.as_of() and changefeed.diff(), each one statement, so one
// snapshot reads the table and its feed.
#include <changefeed/history.hpp>

#include "core/db.hpp"

#include <boost/json/parse.hpp>

namespace changefeed {
namespace {

boost::json::value parsed(const detail::FieldView& f) {
    if (f.is_null()) return nullptr;
    return boost::json::parse(f.c_str());
}

std::string text_of(const detail::FieldView& f) { return f.is_null() ? std::string() : f.c_str(); }

}  // namespace

std::string current_position(const Collection& collection) {
    auto conn = detail::connect(collection.conninfo());
    return detail::translated([&] {
        pqxx::nontransaction tx(*conn);
        return tx.exec("SELECT changefeed.current_position()")[0][0].as<std::string>();
    });
}

std::vector<Document> as_of(const Collection& collection, const std::string& position) {
    auto conn = detail::connect(collection.conninfo());
    return detail::translated([&] {
        pqxx::nontransaction tx(*conn);
        auto r = tx.exec_params("SELECT doc_id, document::text FROM changefeed.as_of($1::regclass, $2)",
                                collection.table(), position);
        std::vector<Document> out;
        out.reserve(r.size());
        for (const auto& row : r) {
            Document d;
            d.doc_id = row[0].as<std::string>();
            d.document_json = row[1].as<std::string>();
            d.document = boost::json::parse(d.document_json);
            out.push_back(std::move(d));
        }
        return out;
    });
}

std::vector<NetChange> diff(const Collection& collection, const std::string& since, const std::string& upto) {
    auto conn = detail::connect(collection.conninfo());
    return detail::translated([&] {
        pqxx::nontransaction tx(*conn);
        auto r = tx.exec_params("SELECT doc_id, operation, current::text, previous::text, to_json(event_ids)::text"
                                "  FROM changefeed.diff($1::regclass, $2, $3) ORDER BY doc_id",
                                collection.table(), since, upto);
        std::vector<NetChange> out;
        out.reserve(r.size());
        for (const auto& row : r) {
            NetChange n;
            n.doc_id = row[0].as<std::string>();
            n.operation = operation_named(row[1].as<std::string>()).value_or(Operation::replace);
            n.current = parsed(row[2]);
            n.previous = parsed(row[3]);
            n.current_json = text_of(row[2]);
            n.previous_json = text_of(row[3]);
            const auto ids = boost::json::parse(row[4].c_str());
            for (const auto& id : ids.as_array()) n.event_ids.emplace_back(id.as_string());
            out.push_back(std::move(n));
        }
        return out;
    });
}

}  // namespace changefeed
