// Internal: what a connection string says beyond libpq's keywords.
//
// `changefeed_pooler=transaction` (or `?changefeed_pooler=transaction` in a
// URI) says the connections go through a pooler in transaction mode (PgBouncer
// pool_mode=transaction): the client then keeps no state in a server session,
// since the next transaction may run on another one.  `session` and `none`
// change nothing.  The keyword is taken out before libpq sees the string.
#pragma once

#include <string>

namespace changefeed::detail {

struct ConnectionTarget {
    std::string libpq;                // the string without changefeed's keyword
    bool transaction_pooler = false;  // changefeed_pooler=transaction
};

// Splits `conninfo`; throws Error(invalid_option) for a value of
// changefeed_pooler other than transaction, session or none.
ConnectionTarget connection_target(const std::string& conninfo);

// connection_target(conninfo).transaction_pooler.
bool through_transaction_pooler(const std::string& conninfo);

}  // namespace changefeed::detail
