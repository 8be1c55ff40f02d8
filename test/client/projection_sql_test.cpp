// One TransactionalHandler, its SQL included, on both providers
// (client/examples/order_totals.hpp): driven by an InMemoryCollection with a
// scratch database for tx.sql(), then by the real feed of an enabled table;
// the projection table ends the same, numerics to the last digit, deletes
// applied, a failing batch rolled back and delivered again.
#include "support/cluster.hpp"

#include "../../client/examples/order_totals.hpp"

#include <atomic>
#include <map>
#include <string>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("projsql", CF_TEST_PORT, true);

namespace {

// The cluster's connection string for another database (libpq takes a
// keyword's last value).
std::string in_database(const std::string& database) { return cluster().conninfo() + " dbname=" + database; }

const char* kProjection = "CREATE TABLE order_totals (id text PRIMARY KEY, customer text, total numeric)";

// The projection table of `database` as id -> "customer total".
std::map<std::string, std::string> totals(const std::string& database) {
    std::map<std::string, std::string> out;
    pqxx::connection c(in_database(database));
    pqxx::nontransaction tx(c);
    for (const auto& row : tx.exec("SELECT id, customer, total::text FROM order_totals"))
        out[row[0].as<std::string>()] = row[1].as<std::string>() + " " + row[2].as<std::string>();
    return out;
}

const std::map<std::string, std::string> kExpected{
    {"1", "ada 12345678901234567.89"},
    {"3", "cy 0.10"},
};

TEST(ProjectionSql, OneHandlerRunsOnTheInMemoryFeedAgainstAScratchDatabase) {
    {
        pqxx::connection c(cluster().conninfo());
        pqxx::nontransaction(c).exec("CREATE DATABASE projsql_scratch");
    }
    {
        pqxx::connection c(in_database("projsql_scratch"));
        pqxx::nontransaction(c).exec(kProjection);
    }
    changefeed::InMemoryOptions mo;
    mo.projection_database = in_database("projsql_scratch");
    changefeed::InMemoryCollection orders(mo);
    std::atomic<int> failures_left{1};
    auto handler = [&](const std::vector<changefeed::Change>& batch, changefeed::Transaction& tx,
                       const changefeed::Context& ctx) {
        examples::project_order_totals(batch, tx, ctx);
        if (failures_left-- > 0) throw std::runtime_error("the first batch fails after writing");
    };
    auto p = changefeed::make_processor(orders, "totals", changefeed::TransactionalHandler(handler),
                                        changefeed::AllVersionsOptions(cftest::fast_options("unit")));
    p.start();
    orders.create({{"id", 1}, {"customer", "ada"}, {"total", 5}});
    orders.create({{"id", 2}, {"customer", "bo"}, {"total", 7}});
    orders.create({{"id", 3}, {"customer", "cy"}, {"total", "0.10"}});
    orders.delete_("2");
    // A number a double cannot hold, given as the text PostgreSQL would write.
    orders.replace({{"id", 1}, {"customer", "ada"}, {"total", "12345678901234567.89"}});
    p.wait_until_caught_up(30s);
    EXPECT_EQ(totals("projsql_scratch"), kExpected);
    // The rolled-back first attempt left nothing twice: one row per order.
    pqxx::connection c(in_database("projsql_scratch"));
    EXPECT_EQ(pqxx::nontransaction(c).exec("SELECT count(*) FROM order_totals")[0][0].as<int>(), 2);
}

TEST(ProjectionSql, TheSameHandlerRunsOnTheRealFeed) {
    cluster().exec("CREATE TABLE orders (id int PRIMARY KEY, customer text, total numeric);"
                   "SELECT changefeed.enable('orders', ranges => 2);" +
                   std::string(kProjection));
    auto p = changefeed::make_processor({cluster().conninfo(), "orders"}, "totals",
                                        changefeed::TransactionalHandler(examples::project_order_totals),
                                        changefeed::AllVersionsOptions(cftest::fast_options("prod")));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 2));
    cluster().exec("INSERT INTO orders VALUES (1, 'ada', 5), (2, 'bo', 7), (3, 'cy', 0.10)");
    cluster().exec("DELETE FROM orders WHERE id = 2");
    cluster().exec("UPDATE orders SET total = 12345678901234567.89 WHERE id = 1");
    p.wait_until_caught_up(30s);
    EXPECT_EQ(totals("postgres"), kExpected);
}

}  // namespace
