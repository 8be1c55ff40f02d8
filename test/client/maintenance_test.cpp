// Maintenance never stalls the feed: it runs in a worker of its own, step by
// step, each step with a lock_timeout.  A table lock held by a user, or a long
// reader transaction, makes only the step that needs the lock fail (logged,
// retried on a later round); wake-ups and reads go on meanwhile.  The
// notifier's own transaction is guarded: an error is logged and retried, and
// the worker keeps running.  A step that runs too long (a table owner's trigger
// that sleeps) is cancelled at changefeed.maintenance_statement_timeout.
//
// No test asserts a timing: "promptly" means well within a generous bound
// while the blocking lock is still held.
#include "support/cluster.hpp"
#include "support/listening.hpp"

#include <pqxx/pqxx>

#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

using namespace std::chrono_literals;

namespace {

const char* const kName = "maintenance";
CF_CLUSTER_ENVIRONMENT(kName, CF_TEST_PORT, true);

// The cluster's folder is CF_TEST_DIR-<name> (support/cluster.cpp).
std::string server_log_path() { return std::string(CF_TEST_DIR) + "-" + kName + "/server.log"; }

// The server log from `offset` on.
std::string server_log_since(std::size_t offset) {
    std::ifstream in(server_log_path());
    std::stringstream all;
    all << in.rdbuf();
    std::string text = all.str();
    return offset < text.size() ? text.substr(offset) : std::string();
}

std::size_t server_log_size() {
    std::ifstream in(server_log_path(), std::ios::ate);
    return in ? static_cast<std::size_t>(in.tellg()) : 0;
}

// A maintenance round every second (the cluster starts with the default 300 s).
void fast_maintenance() {
    static bool done = false;
    if (done) return;
    auto& c = cftest::cluster();
    pqxx::connection conn(c.conninfo());
    pqxx::nontransaction tx(conn);
    tx.exec("ALTER SYSTEM SET changefeed.maintain_interval = 1");
    tx.exec("SELECT pg_reload_conf()");
    done = true;
}

std::string current_position(cftest::Cluster& c) {
    return c.exec("SELECT changefeed.current_position()")[0][0].as<std::string>();
}

// How many changes of `table` a read from `pos` returns.
int changes_since(cftest::Cluster& c, const std::string& table, const std::string& pos) {
    pqxx::connection conn(c.conninfo());
    pqxx::work tx(conn);
    return tx.exec("SELECT count(*) FROM changefeed.read('" + table + "', " + tx.quote(pos) + ")")[0][0].as<int>();
}

int worker_pid(cftest::Cluster& c, const std::string& type) {
    auto r = c.exec("SELECT pid FROM pg_stat_activity WHERE backend_type = '" + type +
                    "' AND datname = current_database()");
    return r.empty() ? 0 : r[0][0].as<int>();
}

TEST(Maintenance, AHeldTableLockFailsOnlyItsTtlStepAndWakeUpsGoOn) {
    auto& c = cftest::cluster();
    fast_maintenance();
    c.exec("CREATE TABLE m_locked (id int PRIMARY KEY, expires_at timestamptz NOT NULL);"
           "SELECT changefeed.enable('m_locked', ttl_column => 'expires_at');"
           "INSERT INTO m_locked VALUES (2, now() + interval '1 day')");
    cftest::create_table(c, "m_busy", 4);
    ASSERT_TRUE(cftest::eventually([&] { return worker_pid(c, "changefeed maintainer") != 0; }));

    // A session holds ACCESS EXCLUSIVE on the TTL table in an open transaction.
    std::size_t log_start = server_log_size();
    pqxx::connection holder(c.conninfo());
    auto hold = std::make_unique<pqxx::work>(holder);
    hold->exec("INSERT INTO m_locked VALUES (1, now() - interval '1 minute')");  // expired, kept by the lock
    hold->exec("LOCK TABLE m_locked IN ACCESS EXCLUSIVE MODE");

    // Its TTL step fails with a lock timeout, is logged, and the worker goes on.
    ASSERT_TRUE(cftest::eventually([&] {
        auto log = server_log_since(log_start);
        return log.find("step \"expire public.m_locked\" failed: canceling statement due to lock timeout") !=
               std::string::npos;
    }));

    // Meanwhile writes to another table wake a listener and can be read.
    cftest::Listening listener(c, {"m_busy"});
    std::string pos = current_position(c);
    c.exec("INSERT INTO m_busy (id) VALUES (1), (2)");
    EXPECT_TRUE(listener.wait_any(10s));
    EXPECT_EQ(changes_since(c, "m_busy", pos), 2);

    // The lock is still held (it was never released): commit it now, and a
    // later round expires the row.
    std::string before = current_position(c);
    hold->commit();
    hold.reset();
    EXPECT_TRUE(cftest::eventually([&] {
        return c.exec("SELECT count(*) FROM m_locked WHERE id = 1")[0][0].as<int>() == 0;
    }));
    auto deleted = c.exec("SELECT doc_id, ttl_expired FROM changefeed.read('m_locked', '" + before +
                          "') WHERE operation = 'delete'");
    ASSERT_EQ(deleted.size(), 1u);
    EXPECT_EQ(deleted[0][0].as<std::string>(), "1");
    EXPECT_TRUE(deleted[0][1].as<bool>());
    EXPECT_EQ(c.exec("SELECT count(*) FROM m_locked")[0][0].as<int>(), 1);  // the unexpired row stays
    c.exec("SELECT changefeed.disable('m_locked'); DROP TABLE m_locked");
}

TEST(Maintenance, ALongReaderDelaysOnlyThePartitionDrop) {
    auto& c = cftest::cluster();
    fast_maintenance();
    cftest::create_table(c, "m_read", 4);

    // Rounds pause while this session holds maintenance's lock: meanwhile two
    // expired partitions (a month old) are made, and a reader takes its snapshot.
    pqxx::connection pauser(c.conninfo());
    pqxx::nontransaction pause(pauser);
    pause.exec("SELECT pg_advisory_lock(hashtext('changefeed.maintain'))");
    c.exec("SELECT changefeed.create_partitions(0, now() - interval '30 days')");
    auto old_parts = [&] {
        return c
            .exec("SELECT count(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid"
                  " WHERE i.inhparent = 'changefeed.log'::regclass AND p.relname ~ '^log_[0-9]{8}$'"
                  " AND to_date(substr(p.relname, 5), 'YYYYMMDD') < current_date - 20")[0][0]
            .as<int>();
    };
    ASSERT_EQ(old_parts(), 2);

    pqxx::connection reader(c.conninfo());
    auto snapshot = std::make_unique<pqxx::work>(reader);
    snapshot->exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
    snapshot->exec("SELECT count(*) FROM changefeed.log");
    std::size_t log_start = server_log_size();
    pause.exec("SELECT pg_advisory_unlock(hashtext('changefeed.maintain'))");

    // The drop times out and is logged.
    ASSERT_TRUE(cftest::eventually([&] {
        auto log = server_log_since(log_start);
        return log.find("changefeed maintenance: step \"drop changefeed.log_") != std::string::npos &&
               log.find("lock timeout") != std::string::npos;
    }));
    EXPECT_EQ(old_parts(), 2);

    // Wake-ups and reads go on while the reader still holds its snapshot.
    cftest::Listening listener(c, {"m_read"});
    std::string pos = current_position(c);
    c.exec("INSERT INTO m_read (id) VALUES (1), (2), (3)");
    EXPECT_TRUE(listener.wait_any(10s));
    EXPECT_EQ(changes_since(c, "m_read", pos), 3);

    // Once the reader is done, a later round drops them.
    snapshot->commit();
    snapshot.reset();
    EXPECT_TRUE(cftest::eventually([&] { return old_parts() == 0; }));
}

TEST(Maintenance, AFailedNotifyIsRetriedAndTheNotifierKeepsRunning) {
    auto& c = cftest::cluster();
    // More collections written in one transaction than the notifier tracks one
    // by one: it then notifies every collection, which reads changefeed.collection.
    const int tables = 70;
    std::string sql;
    for (int i = 0; i < tables; ++i)
        sql += "CREATE TABLE m_many_" + std::to_string(i) +
               " (id int PRIMARY KEY);"
               "SELECT changefeed.enable('m_many_" +
               std::to_string(i) + "');";
    c.exec(sql);
    c.exec("INSERT INTO m_many_0 VALUES (0)");  // starts the notifier if needed
    int notifier = 0;
    ASSERT_TRUE(cftest::eventually([&] { return (notifier = worker_pid(c, "changefeed notifier")) != 0; }));

    cftest::Listening listener(c, {"m_many_0"});
    std::size_t log_start = server_log_size();
    pqxx::connection holder(c.conninfo());
    auto hold = std::make_unique<pqxx::work>(holder);
    hold->exec("LOCK TABLE changefeed.collection IN ACCESS EXCLUSIVE MODE");
    std::string insert_all;
    for (int i = 0; i < tables; ++i) insert_all += "INSERT INTO m_many_" + std::to_string(i) + " VALUES (1);";
    c.exec(insert_all);

    // Sending fails (lock timeout), is logged, and is tried again.
    ASSERT_TRUE(cftest::eventually([&] {
        return server_log_since(log_start).find("changefeed notifier: sending wake-ups failed") != std::string::npos;
    }));
    EXPECT_FALSE(listener.wait_any(0ms));
    hold->commit();
    hold.reset();
    EXPECT_TRUE(listener.wait_any(30s));
    EXPECT_EQ(worker_pid(c, "changefeed notifier"), notifier);
}

}  // namespace

TEST(Maintenance, AnOwnersSleepingTriggerHoldsUpOnlyItsOwnTtlStepForTheStatementTimeout) {
    auto& c = cftest::cluster();
    fast_maintenance();
    {
        pqxx::connection conn(c.conninfo());
        pqxx::nontransaction tx(conn);
        tx.exec("ALTER SYSTEM SET changefeed.maintenance_statement_timeout = '300ms'");
        tx.exec("SELECT pg_reload_conf()");
    }
    // The owner of m_sleepy makes every delete of it sleep; m_quick's TTL is ordinary.
    cftest::create_login_role(c, "m_sleepy_owner", {"changefeed_reader"});
    c.exec("CREATE TABLE m_sleepy (id int PRIMARY KEY, expires_at timestamptz NOT NULL);"
           "ALTER TABLE m_sleepy OWNER TO m_sleepy_owner;"
           "CREATE FUNCTION m_sleep() RETURNS trigger LANGUAGE plpgsql AS $$"
           " BEGIN PERFORM pg_sleep(60); RETURN OLD; END $$;"
           "ALTER FUNCTION m_sleep() OWNER TO m_sleepy_owner;"
           "CREATE TRIGGER m_sleep BEFORE DELETE ON m_sleepy FOR EACH ROW EXECUTE FUNCTION m_sleep();"
           "CREATE TABLE m_quick (id int PRIMARY KEY, expires_at timestamptz NOT NULL)");
    c.exec_as("m_sleepy_owner", "SELECT changefeed.enable('m_sleepy', ttl_column => 'expires_at')");
    c.exec("SELECT changefeed.enable('m_quick', ttl_column => 'expires_at')");
    ASSERT_TRUE(cftest::eventually([&] { return worker_pid(c, "changefeed maintainer") != 0; }));
    const int pid = worker_pid(c, "changefeed maintainer");
    std::size_t log_start = server_log_size();
    c.exec("INSERT INTO m_sleepy VALUES (1, now() - interval '1 minute')");

    // Its step is cancelled, logged and retried; the worker lives on.
    ASSERT_TRUE(cftest::eventually([&] {
        auto log = server_log_since(log_start);
        auto first = log.find("step \"expire public.m_sleepy\" failed: canceling statement due to statement timeout");
        return first != std::string::npos &&
               log.find("step \"expire public.m_sleepy\" failed", first + 1) != std::string::npos;
    }));
    // Other tables' TTL goes on meanwhile.
    c.exec("INSERT INTO m_quick VALUES (1, now() - interval '1 minute')");
    EXPECT_TRUE(cftest::eventually([&] { return c.exec("SELECT count(*) FROM m_quick")[0][0].as<int>() == 0; }));
    EXPECT_EQ(worker_pid(c, "changefeed maintainer"), pid);
    EXPECT_EQ(c.exec("SELECT count(*) FROM m_sleepy")[0][0].as<int>(), 1);

    c.exec("SELECT changefeed.disable('m_sleepy'); DROP TABLE m_sleepy; DROP FUNCTION m_sleep();"
           "SELECT changefeed.disable('m_quick'); DROP TABLE m_quick");
    pqxx::connection conn(c.conninfo());
    pqxx::nontransaction tx(conn);
    tx.exec("ALTER SYSTEM RESET changefeed.maintenance_statement_timeout");
    tx.exec("SELECT pg_reload_conf()");
}
