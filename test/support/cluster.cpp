#include "support/cluster.hpp"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace cftest {
namespace {

Cluster* current = nullptr;

void run(const std::string& cmd) {
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("failed: " + cmd);
}

}  // namespace

Cluster::Cluster(std::string name, int port, bool preload, std::vector<std::string> conf, bool create_extension)
    : dir_(std::string(CF_TEST_DIR) + "-" + name), port_(port), preload_(preload), conf_(std::move(conf)),
      create_extension_(create_extension) {}

void Cluster::start() {
    std::string extra;
    for (const auto& line : conf_) extra += " --conf \"" + line + "\"";
    run(std::string("bash ") + CF_CLUSTER_SH + " start " + dir_ + " --port " + std::to_string(port_) + " --fsync-off" +
        (preload_ ? "" : " --no-preload") + extra);
    running_ = true;
    if (create_extension_) exec("CREATE EXTENSION IF NOT EXISTS changefeed");
}

Cluster Cluster::make_standby(const std::string& name, int port) const {
    Cluster s(name, port, preload_, conf_, false);
    run(std::string("bash ") + CF_CLUSTER_SH + " standby " + dir_ + " " + s.dir_ + " --port " + std::to_string(port));
    s.running_ = true;
    return s;
}

void Cluster::promote() { run(std::string("bash ") + CF_CLUSTER_SH + " promote " + dir_); }

std::string multi_host_conninfo(const std::vector<const Cluster*>& clusters, const std::string& target_session_attrs) {
    std::string hosts, ports;
    for (const Cluster* c : clusters) {
        hosts += (hosts.empty() ? "" : ",") + c->host();
        ports += (ports.empty() ? "" : ",") + std::to_string(c->port());
    }
    // A short connect_timeout: a host that is gone must not hold up the next one.
    return "host=" + hosts + " port=" + ports + " user=postgres dbname=postgres connect_timeout=2" +
           " target_session_attrs=" + target_session_attrs;
}

void Cluster::stop(bool immediate) {
    if (!running_) return;
    run(std::string("bash ") + CF_CLUSTER_SH + " stop " + dir_ + (immediate ? " --immediate" : ""));
    running_ = false;
}

void Cluster::restart(bool immediate) {
    run(std::string("bash ") + CF_CLUSTER_SH + " restart " + dir_ + (immediate ? " --immediate" : ""));
}

std::string Cluster::conninfo() const { return conninfo_as("postgres"); }

std::string Cluster::conninfo_as(const std::string& user) const {
    return "host=" + dir_ + " port=" + std::to_string(port_) + " user=" + user + " dbname=postgres";
}

pqxx::result Cluster::exec(const std::string& sql) { return exec_as("postgres", sql); }

pqxx::result Cluster::exec_as(const std::string& user, const std::string& sql) {
    pqxx::connection c(conninfo_as(user));
    pqxx::work tx(c);
    auto r = tx.exec(sql);
    tx.commit();
    return r;
}

Cluster& cluster() {
    if (!current) throw std::logic_error("no cluster environment registered");
    return *current;
}

void ClusterEnvironment::SetUp() {
    current = new Cluster(name_, port_, preload_);
    current->start();
}

void ClusterEnvironment::TearDown() {
    if (current) current->stop(true);
}

void create_table(Cluster& c, const std::string& name, int ranges) {
    c.exec("CREATE TABLE " + name +
           " (id int PRIMARY KEY, v text, deleted bool NOT NULL DEFAULT false, doc jsonb);"
           "SELECT changefeed.enable('" +
           name + "', ranges => " + std::to_string(ranges) + ")");
}

void create_login_role(Cluster& c, const std::string& name, const std::vector<std::string>& member_of) {
    std::string sql = "CREATE ROLE " + name + " LOGIN NOSUPERUSER";
    for (const auto& m : member_of) sql += "; GRANT " + m + " TO " + name;
    c.exec(sql);
}

std::string sqlstate_as(Cluster& c, const std::string& user, const std::string& sql) {
    try {
        c.exec_as(user, sql);
    } catch (const pqxx::insufficient_privilege&) {
        return "42501";  // libpqxx 6 leaves sqlstate() empty for this one
    } catch (const pqxx::sql_error& e) {
        return e.sqlstate().empty() ? std::string("(unknown)") : std::string(e.sqlstate());
    }
    return "";
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + scaled(timeout);
    while (std::chrono::steady_clock::now() < deadline) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return condition();
}

bool wait_running(const changefeed::Processor& p, std::optional<std::size_t> ranges,
                  std::chrono::milliseconds timeout) {
    return eventually(
        [&] { return p.state() == changefeed::State::running && (!ranges || p.owned_ranges().size() == *ranges); },
        timeout);
}

namespace {

// The running test's name, lower case, for names of its own.
std::string test_name() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info ? info->name() : "no_test";
    for (auto& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    return name;
}

}  // namespace

std::string test_table(const std::string& prefix) { return prefix + "_" + test_name(); }

std::string test_file(const std::string& suffix) {
    std::string path = std::string(CF_TEST_DIR) + "-" + test_name() + "-" + suffix;
    std::remove(path.c_str());
    return path;
}

changefeed::Handler noop_handler() {
    return [](const std::vector<changefeed::Change>&, const changefeed::Context&) {};
}

}  // namespace cftest
