// libpqxx across its major versions (6.4 on Debian 12, 7.x, 8.x): every place
// where its API differs is bridged here, so the sources spell each thing once.
#pragma once

#include <pqxx/pqxx>
#include <pqxx/version>

namespace changefeed::detail {

// 7 renamed pqxx::readwrite_policy to pqxx::write_policy.
#if PQXX_VERSION_MAJOR >= 7
inline constexpr pqxx::write_policy kReadOnly = pqxx::write_policy::read_only;
#else
inline constexpr pqxx::readwrite_policy kReadOnly = pqxx::readwrite_policy::read_only;
#endif

// A read-only REPEATABLE READ transaction: one snapshot for a whole read.
using ReadOnlySnapshotTx = pqxx::transaction<pqxx::isolation_level::repeatable_read, kReadOnly>;

}  // namespace changefeed::detail
