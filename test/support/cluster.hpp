// Test harness: a throwaway PostgreSQL cluster per test binary, started with
// test/cluster.sh, and small helpers shared by the suites.
#pragma once

#include <changefeed/changefeed.hpp>

#include "support/fast_options.hpp"
#include "support/timing.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cftest {

class Cluster {
public:
    // `conf`: postgresql.conf lines added at start; without `create_extension`
    // start() leaves the database as initdb made it.
    Cluster(std::string name, int port, bool preload, std::vector<std::string> conf = {}, bool create_extension = true);
    void start();
    void stop(bool immediate = false);
    void restart(bool immediate = false);
    // A streaming hot standby of this (running) cluster, made now with
    // pg_basebackup -R and started: it replays this cluster's WAL and
    // takes read-only queries.  stop() stops it as any cluster.
    Cluster make_standby(const std::string& name, int port) const;
    // Promotes a standby: it takes writes once this returns.
    void promote();
    // The socket folder: a host entry of a multi-host connection string.
    std::string host() const { return dir_; }
    std::string conninfo() const;  // as the superuser postgres
    // The same cluster as another role (trust auth on the socket: no password).
    std::string conninfo_as(const std::string& user) const;
    // Runs SQL on a fresh connection, in one transaction.
    pqxx::result exec(const std::string& sql);
    pqxx::result exec_as(const std::string& user, const std::string& sql);
    int port() const { return port_; }

private:
    std::string dir_;
    int port_;
    bool preload_;
    std::vector<std::string> conf_;
    bool create_extension_ = true;
    bool running_ = false;
};

// A connection string that tries each cluster in turn and takes the one
// that accepts writes: how a processor follows a failover.
std::string multi_host_conninfo(const std::vector<const Cluster*>& clusters,
                                const std::string& target_session_attrs = "read-write");

// The cluster of the current test binary (see CF_CLUSTER_ENVIRONMENT).
Cluster& cluster();

class ClusterEnvironment : public ::testing::Environment {
public:
    ClusterEnvironment(std::string name, int port, bool preload)
        : name_(std::move(name)), port_(port), preload_(preload) {}
    void SetUp() override;
    void TearDown() override;

private:
    std::string name_;
    int port_;
    bool preload_;
};

// Registers the binary's cluster: CF_CLUSTER_ENVIRONMENT("lease", CF_TEST_PORT, true);
#define CF_CLUSTER_ENVIRONMENT(name, port, preload)                                                     \
    static ::testing::Environment* const cf_cluster_environment_ = ::testing::AddGlobalTestEnvironment( \
        new ::cftest::ClusterEnvironment(name, port, preload))

// Creates `name` (id int primary key, v text, deleted bool, doc jsonb) and enables it.
void create_table(Cluster& c, const std::string& name, int ranges = 16);

// Creates a LOGIN role (not superuser) that is a member of `member_of`, e.g.
// create_login_role(c, "billing_svc", {"changefeed_processor"}).
void create_login_role(Cluster& c, const std::string& name, const std::vector<std::string>& member_of = {});

// The SQLSTATE `sql` fails with when run as `user` ("" if it succeeds).
std::string sqlstate_as(Cluster& c, const std::string& user, const std::string& sql);

// Polls `condition` until it holds or `timeout` (scaled, timing.hpp) passed;
// returns whether it held.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = std::chrono::seconds(30));

// Waits until `p` is running and, when `ranges` is given, owns that many
// ranges; returns whether it got there within `timeout` (scaled).
bool wait_running(const changefeed::Processor& p, std::optional<std::size_t> ranges = std::nullopt,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));

// A table name of the running test's own: `prefix`_<test name>, lower case.
std::string test_table(const std::string& prefix);

// A scratch file of the running test's own, next to the suite's clusters
// (removed first, so the test starts with none).
std::string test_file(const std::string& suffix);

// A handler that does nothing.
changefeed::Handler noop_handler();

// The error code `f` throws (a changefeed::Error), or none.
template <class F>
std::error_code code_of(F&& f) {
    try {
        f();
    } catch (const changefeed::Error& e) {
        return e.code();
    }
    return {};
}

// The feed-only options, to check which feed's option types have them.
template <class O>
concept has_start_from_beginning = requires(O o) {
    o.start_from_beginning;
};
template <class O>
concept has_resync = requires(O o) {
    o.resync;
};
// The common options of `o`, for the all-versions feed.
inline changefeed::AllVersionsOptions common_options(changefeed::LatestVersionOptions o) {
    return changefeed::AllVersionsOptions(static_cast<changefeed::ProcessorOptions>(std::move(o)));
}

}  // namespace cftest
