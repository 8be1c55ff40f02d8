// Links against the installed library and checks an error code, without a
// server.  The transactional handler is only built, never run: it proves that
// the package links what a handler's tx.sql() needs (libpqxx).
#include <changefeed/changefeed.hpp>

#include <pqxx/pqxx>

#include <iostream>

int main() {
    changefeed::TransactionalHandler copy = [](const std::vector<changefeed::Change>& batch,
                                               changefeed::Transaction& tx, const changefeed::Context&) {
        for (const auto& c : batch)
            tx.sql().exec_params("INSERT INTO order_copy VALUES ($1::int, $2::jsonb)", c.doc_id, c.current_json);
    };
    try {
        auto p = changefeed::make_processor(changefeed::Collection("", "public.users"), "", std::move(copy));
    } catch (const changefeed::Error& e) {
        if (e.code() == changefeed::errc::processor_name_empty) {
            std::cout << "ok: " << e.what() << "\n";
            return 0;
        }
    }
    std::cerr << "expected processor_name_empty\n";
    return 1;
}
