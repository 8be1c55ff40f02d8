#pragma once
// A processor's next read, issued on a connection of its own while the
// changes of the previous one are parsed and handled (the pipelined read
// path).  Its rows come back unparsed: parsing them here would keep the
// server waiting for the next read while the client parses.

#include "read/feed_reader.hpp"

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <pqxx/pqxx>
#include <string>

namespace changefeed::detail {

class ReadAhead {
public:
    explicit ReadAhead(std::string conninfo) : conninfo_(std::move(conninfo)) {}
    ~ReadAhead() { drop(); }
    ReadAhead(const ReadAhead&) = delete;
    ReadAhead& operator=(const ReadAhead&) = delete;

    // Starts fetch_rows(since, max) in the background; a read already running
    // or not taken is dropped first.
    void start(const std::string& table, std::map<int, std::string> since, int max, int positions_every, FeedMode mode,
               const TenantScope& scope);
    // The result of the read started from exactly `since` with `max`, if it
    // succeeded; any other read is dropped.  A failed read is dropped too: the
    // caller reads again and meets the error itself.
    std::optional<pqxx::result> take(const std::map<int, std::string>& since, int max);
    // Waits for a running read and forgets it.
    void drop();
    // Caught up: closes the connection once no read started for a while, so
    // that a processor reading no backlog holds none for reading ahead.
    void rest();
    // Stopping: drops a running read and closes the connection.
    void close();

private:
    std::string conninfo_;
    std::unique_ptr<pqxx::connection> conn_;  // used by the running read alone
    std::map<int, std::string> since_;
    int max_ = 0;
    std::future<pqxx::result> result_;
    std::chrono::steady_clock::time_point last_start_{};
};

}  // namespace changefeed::detail
