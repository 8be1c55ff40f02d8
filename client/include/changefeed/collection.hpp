// A handle on an enabled table: where it lives and what the server knows of it.
#pragma once

#include <string>
#include <vector>

namespace changefeed {

// What changefeed.collections says of a table.
struct CollectionInfo {
    int id = 0;
    std::string table_name;
    std::vector<std::string> key_columns;
    int ranges = 0;
    std::string channel;  // the LISTEN channel of its wake-ups
};

class Collection {
public:
    // `conninfo` is a libpq connection string ("" uses the PG* environment);
    // `table` is a table name as SQL would resolve it, e.g. "public.users".
    Collection(std::string conninfo, std::string table);

    const std::string& conninfo() const noexcept { return conninfo_; }
    const std::string& table() const noexcept { return table_; }

    // Looks the table up on the server.  Throws Error with
    // collection_not_found or collection_not_enabled.
    CollectionInfo describe() const;

private:
    std::string conninfo_;
    std::string table_;
};

}  // namespace changefeed
