// libpqxx across its major versions (6.4 on Debian 12, 7.x, 8.x): every place
// where its API differs is bridged here, so the sources spell each thing once.
#pragma once

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

}  // namespace changefeed::detail
