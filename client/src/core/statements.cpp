#include "core/statements.hpp"

#include <pqxx/version>

#include <map>
#include <mutex>
#include <set>

namespace changefeed::detail {

namespace {

// Per connection, told apart by address and server process (a new
// connection at the address of a closed one starts afresh): whether it goes
// through a transaction pooler, and the statements prepared on it.
struct Prepared {
    int pid = 0;
    bool transaction_pooler = false;
    std::set<std::string> names;
};
std::mutex mutex;
std::map<const pqxx::connection*, Prepared> connections;

}  // namespace

void note_connection(const pqxx::connection& c, bool transaction_pooler) {
    std::lock_guard<std::mutex> lock(mutex);
    connections[&c] = Prepared{c.backendpid(), transaction_pooler, {}};
}

bool through_transaction_pooler(const pqxx::connection& c) {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = connections.find(&c);
    return it != connections.end() && it->second.pid == c.backendpid() && it->second.transaction_pooler;
}

bool prepared_on(pqxx::connection& c, const std::string& name, const std::string& sql) {
    const int pid = c.backendpid();
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto& entry = connections[&c];
        if (entry.pid != pid) entry = Prepared{pid, false, {}};
        if (entry.transaction_pooler) return false;
        if (entry.names.count(name)) return true;
    }
    // 6.4's prepare() only records the definition (prepared on first use);
    // 7's sends PREPARE at once.
    c.prepare(name, sql);
    std::lock_guard<std::mutex> lock(mutex);
    connections[&c].names.insert(name);
    return true;
}

}  // namespace changefeed::detail
