#include "lease/lease_session.hpp"

#include "core/db.hpp"

#include <map>
#include <utility>

namespace changefeed::detail {

std::shared_ptr<LeaseSession> LeaseSession::of(const std::string& conninfo) {
    static std::mutex registry_mu;
    static std::map<std::string, std::weak_ptr<LeaseSession>> registry;
    std::lock_guard lock(registry_mu);
    auto& slot = registry[conninfo];
    if (auto shared = slot.lock()) return shared;
    // Sessions nobody holds any more are forgotten as new ones come.
    for (auto it = registry.begin(); it != registry.end();) {
        if (it->second.expired() && &it->second != &slot) it = registry.erase(it);
        else ++it;
    }
    auto fresh = std::make_shared<LeaseSession>(conninfo);
    slot = fresh;
    return fresh;
}

std::uint64_t LeaseSession::join(std::unique_ptr<pqxx::connection> conn) {
    std::lock_guard lock(mu_);
    ++members_;
    if (conn_ && conn_->is_open()) return 0;
    conn_ = std::move(conn);
    return ++generation_;
}

void LeaseSession::leave() {
    std::lock_guard lock(mu_);
    if (--members_ <= 0) {
        members_ = 0;
        conn_.reset();
    }
}

void LeaseSession::connect_now() {
    conn_ = connect(conninfo_);
    ++generation_;
}

void LeaseSession::drop_if_lost(std::exception_ptr e) {
    if (!conn_ || !conn_->is_open() || is_connection_error(to_error(e))) conn_.reset();
}

}  // namespace changefeed::detail
