// libpqxx across its major versions (6.4 on Debian 12, 7.x, 8.x): every place
// where its API differs is bridged here, so the sources spell each thing once.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include <pqxx/pqxx>
#include <pqxx/version>

namespace changefeed::detail {

// 7 renamed pqxx::readwrite_policy to pqxx::write_policy.
#if PQXX_VERSION_MAJOR >= 7
inline constexpr pqxx::write_policy kReadOnly = pqxx::write_policy::read_only;
#else
inline constexpr pqxx::readwrite_policy kReadOnly = pqxx::readwrite_policy::read_only;
#endif

// 8 iterates a result as row_ref and field_ref, light views of a row and a
// field; 6 and 7 as row and field.
#if PQXX_VERSION_MAJOR >= 8
using RowView = pqxx::row_ref;
using FieldView = pqxx::field_ref;
#else
using RowView = pqxx::row;
using FieldView = pqxx::field;
#endif

// A read-only REPEATABLE READ transaction: one snapshot for a whole read.
using ReadOnlySnapshotTx = pqxx::transaction<pqxx::isolation_level::repeatable_read, kReadOnly>;

// Prepares statement `name` on `c` unless it is already.  6.4's prepare()
// only records the definition (prepared on first use) and may be repeated;
// 7's sends PREPARE at once and fails when the name exists.  Connections are
// told apart by address and server process, so a new connection at the
// address of a closed one prepares again.
inline void prepare_once(pqxx::connection& c, const std::string& name, const std::string& sql) {
#if PQXX_VERSION_MAJOR >= 7
    static std::mutex mutex;
    static std::map<const pqxx::connection*, std::pair<int, std::set<std::string>>> prepared;
    const int pid = c.backendpid();
    {
        std::lock_guard<std::mutex> lock(mutex);
        auto& entry = prepared[&c];
        if (entry.first != pid) entry = {pid, {}};
        if (entry.second.count(name)) return;
    }
    c.prepare(name, sql);
    std::lock_guard<std::mutex> lock(mutex);
    prepared[&c].second.insert(name);
#else
    c.prepare(name, sql);
#endif
}

}  // namespace changefeed::detail
