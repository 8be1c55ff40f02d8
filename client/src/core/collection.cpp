// Collection handle: looks its table up in changefeed.collections.
#include <changefeed/collection.hpp>

#include "core/db.hpp"

#include <boost/json/parse.hpp>

namespace changefeed {
namespace {

// A text[] sent as a JSON array (column names may hold any character).
std::vector<std::string> names_of(const detail::FieldView& f) {
    std::vector<std::string> out;
    const auto list = boost::json::parse(f.c_str());
    for (const auto& v : list.as_array()) out.emplace_back(v.as_string());
    return out;
}

}  // namespace

Collection::Collection(std::string conninfo, std::string table)
    : conninfo_(std::move(conninfo)), table_(std::move(table)) {}

CollectionInfo Collection::describe() const {
    if (table_.empty()) throw Error(errc::collection_not_found, "the table name is empty");
    auto conn = detail::connect(conninfo_);
    return detail::translated([&] {
        pqxx::read_transaction tx(*conn);
        // The regclass cast fails with 42P01 for a missing table, collection_of
        // with CF002 for a table that is not enabled; the view lists only the
        // collections whose tables the role may SELECT.
        auto r = tx.exec_params(
            "SELECT x.id, c.table_name::text, to_json(c.key_columns)::text,"
            "       to_json(c.partition_key)::text, c.tenant_column, c.ranges, current_user,"
            "       (SELECT n.nspname || '.' || r.relname FROM pg_catalog.pg_class r"
            "          JOIN pg_catalog.pg_namespace n ON n.oid = r.relnamespace WHERE r.oid = $1::regclass)"
            "  FROM (SELECT (changefeed.collection_of($1::regclass)).id) x"
            "  LEFT JOIN changefeed.collections c ON c.id = x.id",
            table_);
        if (r[0][1].is_null())
            throw Error(errc::permission_denied,
                        "permission denied to read the change feed of " + table_ + ": role " +
                            r[0][6].as<std::string>() + " may not SELECT the table",
                        "42501");
        CollectionInfo info;
        info.id = r[0][0].as<int>();
        info.table_name = r[0][1].as<std::string>();
        info.key_columns = names_of(r[0][2]);
        info.partition_key = names_of(r[0][3]);
        if (!r[0][4].is_null()) info.tenant_column = r[0][4].as<std::string>();
        info.ranges = r[0][5].as<int>();
        info.schema_table = r[0][7].as<std::string>();
        // As changefeed.channel_of() names it (the view's channel column calls
        // that function, which is not granted to readers).
        info.channel = "changefeed_" + std::to_string(info.id);
        return info;
    });
}

}  // namespace changefeed
