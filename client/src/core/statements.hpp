// Internal: the statements a hot path runs over and over (a wake-up's read,
// lease steps, checkpoints), prepared once per connection -- parsed and
// planned once -- unless the connection goes through a transaction pooler,
// whose next transaction may run in a server session where nothing is
// prepared: there they go unnamed, each in one round trip.
#pragma once

#include <pqxx/pqxx>

#include <string>
#include <utility>

namespace changefeed::detail {

// What connect() knows of a new connection `c`: whether it goes through a
// transaction pooler (connection_string.hpp).
void note_connection(const pqxx::connection& c, bool transaction_pooler);

// Whether connect() opened `c` through a transaction pooler.
bool through_transaction_pooler(const pqxx::connection& c);

// Whether `name` may run prepared on `c`: prepares `sql` under `name` the
// first time; false through a transaction pooler.
bool prepared_on(pqxx::connection& c, const std::string& name, const std::string& sql);

// Runs `sql` with `args` in `tx` (a transaction of `c`), prepared as `name`
// where it may be.
template <class Tx, class... Args>
pqxx::result exec_statement(pqxx::connection& c, Tx& tx, const std::string& name, const std::string& sql,
                            Args&&... args) {
    if (prepared_on(c, name, sql)) return tx.exec_prepared(name, std::forward<Args>(args)...);
    return tx.exec_params(sql, std::forward<Args>(args)...);
}

}  // namespace changefeed::detail
