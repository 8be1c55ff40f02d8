// A projection written once and run on both providers: its SQL goes through
// tx.sql(), which on PostgreSQL is the transaction that stores the
// checkpoint, and on the in-memory provider is a transaction of the scratch
// database given as InMemoryOptions::projection_database.  So a unit test
// drives it with an InMemoryCollection and checks the table it wrote, and
// production runs the same function on the real feed
// (test/client/projection_sql_test.cpp does both).
//
// The projection: order_totals(id text PRIMARY KEY, customer text, total
// numeric), one row per order, deleted with it.  Read from the all-versions
// feed, so that a delete reaches it; the document goes in as its text, so the
// numeric keeps every digit.
#pragma once

#include <changefeed/changefeed.hpp>

#include <pqxx/pqxx>

#include <vector>

namespace examples {

inline void project_order_totals(const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                                 const changefeed::Context&) {
    auto& sql = tx.sql();
    for (const auto& c : batch) {
        switch (c.operation) {
        case changefeed::Operation::create:
        case changefeed::Operation::replace:
            sql.exec_params("INSERT INTO order_totals (id, customer, total)"
                            " SELECT $1, d->>'customer', (d->>'total')::numeric FROM (SELECT $2::jsonb AS d) x"
                            " ON CONFLICT (id) DO UPDATE SET customer = excluded.customer, total = excluded.total",
                            c.doc_id, c.current_json);
            break;
        case changefeed::Operation::delete_: sql.exec_params("DELETE FROM order_totals WHERE id = $1", c.doc_id); break;
        case changefeed::Operation::clear: sql.exec("DELETE FROM order_totals"); break;
        case changefeed::Operation::schema: break;  // not asked for
        }
    }
}

}  // namespace examples
