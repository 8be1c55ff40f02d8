// Internal: the connection the lease threads of one process share.  The
// processors of a process that use one connection string keep their leases,
// names and checkpoints on one connection, each lease thread running its
// rounds on it in turn: a process with ten processors holds one such
// connection, not ten.  Their instances live and die with that session
// together, as they do with the process.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <string>

namespace changefeed::detail {

class LeaseSession {
public:
    // The session of `conninfo` in this process, made on first use.
    static std::shared_ptr<LeaseSession> of(const std::string& conninfo);

    explicit LeaseSession(std::string conninfo) : conninfo_(std::move(conninfo)) {}

    // Runs f(conn, generation) alone on the connection, connecting first if
    // need be.  The generation moves with every new connection: an instance
    // name registered on an older one is to be registered again.  A lost
    // connection is dropped for everyone (the next use connects again) and
    // its error goes on to the caller.
    template <class F>
    decltype(auto) use(F&& f) {
        std::lock_guard lock(mu_);
        if (!conn_ || !conn_->is_open()) connect_now();
        try {
            return f(*conn_, generation_);
        } catch (...) {
            drop_if_lost(std::current_exception());
            throw;
        }
    }

    // A lease thread joins: it takes `conn` (on which it registered its
    // name) as the connection if there is none; its generation then, else 0
    // (`conn` is closed: register again on the session's).
    std::uint64_t join(std::unique_ptr<pqxx::connection> conn);
    // A lease thread is done: the last one closes the connection.
    void leave();

private:
    void connect_now();
    void drop_if_lost(std::exception_ptr e);

    const std::string conninfo_;
    std::mutex mu_;
    std::unique_ptr<pqxx::connection> conn_;
    std::uint64_t generation_ = 0;
    int members_ = 0;
};

}  // namespace changefeed::detail
