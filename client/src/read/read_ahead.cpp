#include "read/read_ahead.hpp"

#include "core/db.hpp"

namespace changefeed::detail {

void ReadAhead::start(const std::string& table, std::map<int, std::string> since, int max, int positions_every,
                      FeedMode mode, const TenantScope& scope) {
    drop();
    last_start_ = std::chrono::steady_clock::now();
    since_ = std::move(since);
    max_ = max;
    result_ = std::async(std::launch::async, [this, table, positions_every, mode, scope] {
        try {
            if (!conn_) conn_ = connect(conninfo_);
            return fetch_rows(*conn_, table, since_, max_, positions_every, mode, scope);
        } catch (...) {
            conn_.reset();  // a broken connection is not used again
            throw;
        }
    });
}

std::optional<pqxx::result> ReadAhead::take(const std::map<int, std::string>& since, int max) {
    if (!result_.valid()) return std::nullopt;
    const bool same = since == since_ && max == max_;
    try {
        pqxx::result r = result_.get();
        if (same) return r;
    } catch (...) {
    }
    return std::nullopt;
}

void ReadAhead::drop() {
    if (!result_.valid()) return;
    try {
        result_.get();
    } catch (...) {
    }
}

void ReadAhead::close() {
    drop();
    conn_.reset();
}

void ReadAhead::rest() {
    if (!conn_ || result_.valid()) return;
    if (std::chrono::steady_clock::now() - last_start_ < std::chrono::seconds(10)) return;
    conn_.reset();
}

}  // namespace changefeed::detail
