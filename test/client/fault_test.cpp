// Faults: a killed instance's ranges are taken over after expiry; terminated
// connections and a server restart are survived without losing changes.
#include "support/child.hpp"
#include "support/cluster.hpp"
#include "support/recorder.hpp"

#include <fstream>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("fault", CF_TEST_PORT, true);

namespace {

int owned_by(const std::string& table, const std::string& instance) {
    return cluster()
        .exec("SELECT count(*) FROM changefeed.leases WHERE table_name = '" + table + "'::regclass AND owner = '" +
              instance + "' AND live")[0][0]
        .as<int>();
}

// Records the states a processor went through.
struct States {
    std::mutex mu;
    std::vector<changefeed::State> seen;
    void add(changefeed::State s) {
        std::lock_guard lock(mu);
        seen.push_back(s);
    }
    bool saw_resuming_then_running() {
        std::lock_guard lock(mu);
        bool resuming = false;
        for (auto s : seen) {
            if (s == changefeed::State::resuming) resuming = true;
            if (resuming && s == changefeed::State::running) return true;
        }
        return false;
    }
};

void insert_range(const std::string& table, int from, int to) {
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, 'x' FROM generate_series(" + std::to_string(from) +
                   ", " + std::to_string(to) + ") g");
}

TEST(Faults, AKilledInstancesRangesAreTakenOverAfterExpiry) {
    cftest::create_table(cluster(), "ft_kill", 8);
    auto victim = cftest::processor_runner({cluster().conninfo(), "ft_kill", "killme", "victim", "/dev/null"});
    ASSERT_TRUE(victim.running());
    ASSERT_TRUE(cftest::eventually([] { return owned_by("ft_kill", "victim") == 8; }));

    cftest::Recorder rec;
    auto p = changefeed::make_processor({cluster().conninfo(), "ft_kill"}, "killme", rec.handler(),
                                        cftest::fast_options("survivor"));
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));
    ASSERT_EQ(owned_by("ft_kill", "victim"), 4);

    victim.kill_hard();  // no release: its leases must expire
    insert_range("ft_kill", 1, 80);
    ASSERT_TRUE(cftest::wait_running(p, 8));
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 80; }));
    for (const auto& h : rec.all()) EXPECT_EQ(h.context.instance, "survivor");
}

TEST(Faults, TerminatedConnectionsAreResumedWithoutLoss) {
    cftest::create_table(cluster(), "ft_term", 4);
    cftest::Recorder rec;
    States states;
    auto o = cftest::fast_options("one");
    o.on_state_change = [&](changefeed::State s) { states.add(s); };
    auto p = changefeed::make_processor({cluster().conninfo(), "ft_term"}, "term", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    insert_range("ft_term", 1, 20);
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 20; }));

    cluster().exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                   " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()");
    insert_range("ft_term", 21, 40);
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 40; }));
    EXPECT_TRUE(cftest::eventually([&] { return states.saw_resuming_then_running(); }));
    EXPECT_EQ(p.state(), changefeed::State::running);
}

TEST(Faults, AServerRestartIsResumedWithoutLoss) {
    cftest::create_table(cluster(), "ft_restart", 4);
    cftest::Recorder rec;
    States states;
    auto o = cftest::fast_options("one");
    o.on_state_change = [&](changefeed::State s) { states.add(s); };
    auto p = changefeed::make_processor({cluster().conninfo(), "ft_restart"}, "restart", rec.handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p));
    insert_range("ft_restart", 1, 20);
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 20; }));

    cluster().restart();
    insert_range("ft_restart", 21, 40);  // written while the processor reconnects
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 40; }));
    EXPECT_TRUE(states.saw_resuming_then_running());
    insert_range("ft_restart", 41, 60);
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 60; }));
}

}  // namespace
