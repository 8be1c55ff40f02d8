// A handle on an enabled table: where it lives and what the server knows of it.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace changefeed {

// What changefeed.collections says of a table.
struct CollectionInfo {
    int id = 0;
    std::string table_name;
    std::vector<std::string> key_columns;
    std::vector<std::string> partition_key;    // the partition-key columns, in order
    std::optional<std::string> tenant_column;  // the column naming each row's tenant, if any
    int ranges = 0;
    std::string channel;       // the LISTEN channel of its wake-ups
    std::string schema_table;  // "schema.table" as the catalog names it (unquoted), whatever the search_path
};

class Collection {
public:
    // `conninfo` is a libpq connection string ("" uses the PG* environment);
    // `table` is a table name as SQL would resolve it, e.g. "public.users".
    Collection(std::string conninfo, std::string table);

    const std::string& conninfo() const noexcept { return conninfo_; }
    const std::string& table() const noexcept { return table_; }

    // Looks the table up on the server.  Throws Error with
    // collection_not_found, collection_not_enabled, or permission_denied when
    // the connecting role may not SELECT the table (it may not read its feed).
    CollectionInfo describe() const;

private:
    std::string conninfo_;
    std::string table_;
};

}  // namespace changefeed
