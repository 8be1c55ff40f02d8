// Collection handle: looks its table up in changefeed.collections.
#include <changefeed/collection.hpp>

#include "db.hpp"

namespace changefeed {

Collection::Collection(std::string conninfo, std::string table)
    : conninfo_(std::move(conninfo)), table_(std::move(table)) {}

CollectionInfo Collection::describe() const {
    if (table_.empty()) throw Error(errc::collection_not_found, "the table name is empty");
    auto conn = detail::connect(conninfo_);
    return detail::translated([&] {
        pqxx::read_transaction tx(*conn);
        // The regclass cast fails with 42P01 for a missing table, collection_of
        // with CF002 for a table that is not enabled.
        auto r = tx.exec_params(
            "SELECT c.id, c.table_name::text, array_to_string(c.key_columns, ','), c.ranges, c.channel"
            "  FROM changefeed.collections c"
            " WHERE c.id = (changefeed.collection_of($1::regclass)).id",
            table_);
        CollectionInfo info;
        info.id = r[0][0].as<int>();
        info.table_name = r[0][1].as<std::string>();
        std::string keys = r[0][2].as<std::string>();
        for (std::size_t start = 0; start <= keys.size();) {
            auto comma = keys.find(',', start);
            if (comma == std::string::npos) comma = keys.size();
            info.key_columns.push_back(keys.substr(start, comma - start));
            start = comma + 1;
        }
        info.ranges = r[0][3].as<int>();
        info.channel = r[0][4].as<std::string>();
        return info;
    });
}

}  // namespace changefeed
