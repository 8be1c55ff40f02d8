// Instance identity: default names are unique per process and per processor,
// so two instances split the leases; a name that is live is refused
// (instance_name_in_use) and free again as soon as its holder stopped or its
// process died; the lease notifications follow what the instance holds.
#include "support/child.hpp"
#include "support/cluster.hpp"
#include "support/lease_cycles.hpp"
#include "support/markers.hpp"
#include "support/recorder.hpp"
#include "support/shell.hpp"

#include <unistd.h>

#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

using namespace std::chrono_literals;
using changefeed::errc;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("instance", CF_TEST_PORT, true);

namespace {

changefeed::Processor make(const std::string& table, const std::string& name, changefeed::Handler h,
                           changefeed::ProcessorOptions o) {
    return changefeed::make_processor(changefeed::Collection(cluster().conninfo(), table), name, std::move(h),
                                      std::move(o));
}

int owned_by(const std::string& table, const std::string& instance) {
    return cluster()
        .exec("SELECT count(*) FROM changefeed.leases WHERE table_name = '" + table + "'::regclass AND owner = '" +
              instance + "' AND live")[0][0]
        .as<int>();
}

// What the lease notifications told, in order.
struct LeaseLog {
    std::mutex mu;
    std::vector<std::pair<char, int>> events;  // 'a' acquired / 'r' released, range
    void hook(changefeed::ProcessorOptions& o) {
        o.on_lease_acquired = [this](int r) {
            std::lock_guard lock(mu);
            events.emplace_back('a', r);
        };
        o.on_lease_released = [this](int r) {
            std::lock_guard lock(mu);
            events.emplace_back('r', r);
        };
    }
    // The ranges held according to the notifications.
    std::set<int> held() {
        std::lock_guard lock(mu);
        std::set<int> out;
        for (auto [what, r] : events) {
            if (what == 'a') out.insert(r);
            else out.erase(r);
        }
        return out;
    }
    int count(char what) {
        std::lock_guard lock(mu);
        int n = 0;
        for (auto [w, r] : events) n += w == what;
        return n;
    }
};

std::set<int> as_set(const std::vector<int>& v) { return {v.begin(), v.end()}; }

// The default name is the host's until start() claims "<host>-<n>": the
// lowest slot no other processor object of the process holds.
TEST(Instances, DefaultNamesAreTheHostAndTheLowestFreeSlot) {
    cftest::create_table(cluster(), "in_slots", 2);
    const std::string host = changefeed::default_instance_name();
    EXPECT_EQ(host, changefeed::default_instance_name());
    auto a = make("in_slots", "n", cftest::noop_handler(), cftest::fast_options(""));
    auto b = make("in_slots", "n", cftest::noop_handler(), cftest::fast_options(""));
    auto other = make("in_slots", "other", cftest::noop_handler(), cftest::fast_options(""));
    EXPECT_EQ(a.instance_name(), host);
    a.start();
    b.start();
    other.start();
    EXPECT_EQ(a.instance_name(), host + "-1");
    EXPECT_EQ(b.instance_name(), host + "-2");
    EXPECT_EQ(other.instance_name(), host + "-1");  // slots are per processor
    a.stop();
    auto c = make("in_slots", "n", cftest::noop_handler(), cftest::fast_options(""));
    c.start();
    EXPECT_EQ(c.instance_name(), host + "-1");  // free again once its holder stopped
}

// Two instances of one process used to share the host name as their instance
// name: each held every lease and handled every change.
TEST(Instances, TwoProcessorsWithDefaultNamesInOneProcessSplitTheLeases) {
    cftest::create_table(cluster(), "in_split", 8);
    cftest::Recorder rec;
    auto o = cftest::fast_options("");
    o.lease_duration = 20s;  // no expiry while healthy, even on a loaded machine
    o.renew_interval = 2s;
    auto a = make("in_split", "split", rec.handler(), o);
    auto b = make("in_split", "split", rec.handler(), o);
    a.start();
    b.start();
    EXPECT_NE(a.instance_name(), b.instance_name());
    ASSERT_TRUE(cftest::wait_running(a, 4));
    ASSERT_TRUE(cftest::wait_running(b, 4));
    std::set<int> all = as_set(a.owned_ranges());
    for (int r : b.owned_ranges()) EXPECT_TRUE(all.insert(r).second) << "range " << r << " held twice";
    EXPECT_EQ(all.size(), 8u);
    cluster().exec("INSERT INTO in_split (id, v) SELECT g, 'x' FROM generate_series(1, 100) g");
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 100; }));
    // A duplicate would come before the marker of its range.
    ASSERT_FALSE(cftest::deliver_markers(cluster(), "in_split", 1000, rec).empty());
    for (const auto& [doc, n] : rec.counts()) EXPECT_EQ(n, 1) << "doc " << doc;
    std::set<std::string> instances;
    for (const auto& h : rec.all()) instances.insert(h.context.instance);
    EXPECT_EQ(instances, (std::set<std::string>{a.instance_name(), b.instance_name()}));
    // Both are registered while they run, and gone after stop().
    EXPECT_EQ(
        cluster().exec("SELECT count(*) FROM changefeed.instances('in_split', 'split') WHERE live")[0][0].as<int>(), 2);
    a.stop();
    b.stop();
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM changefeed.instances('in_split', 'split')")[0][0].as<int>(), 0);
}

TEST(Instances, ALiveNameIsRefusedAndFreeAgainOnceItsHolderStopped) {
    cftest::create_table(cluster(), "in_live", 4);
    cftest::Recorder ra, rb;
    auto o = cftest::fast_options("svc-1");
    o.lease_duration = 600s;  // far longer than the test: only the registry explains what happens
    o.renew_interval = 1s;
    auto a = make("in_live", "live", ra.handler(), o);
    auto b = make("in_live", "live", rb.handler(), o);
    a.start();
    ASSERT_TRUE(cftest::wait_running(a, 4));
    EXPECT_EQ(cftest::code_of([&] { b.start(); }), errc::instance_name_in_use);
    try {
        b.start();
    } catch (const changefeed::Error& e) {
        EXPECT_EQ(e.sqlstate(), "CF015");
        EXPECT_NE(std::string(e.what()).find("svc-1"), std::string::npos) << e.what();
    }
    EXPECT_EQ(b.state(), changefeed::State::stopped);
    // The refused instance took nothing: the first still holds and reads every
    // range, after acquire steps of its own that would have met another instance.
    const int epoch = cluster()
                          .exec("SELECT max(epoch) FROM changefeed.leases WHERE table_name = 'in_live'::regclass")[0][0]
                          .as<int>();
    ASSERT_TRUE(cftest::lease_cycles(cluster(), "in_live", "live", {"svc-1"}, o.lease_duration, 3));
    EXPECT_EQ(a.owned_ranges().size(), 4u);
    EXPECT_EQ(cluster()
                  .exec("SELECT max(epoch) FROM changefeed.leases WHERE table_name = 'in_live'::regclass")[0][0]
                  .as<int>(),
              epoch);  // no lease changed hands
    cluster().exec("INSERT INTO in_live (id, v) SELECT g, 'x' FROM generate_series(1, 20) g");
    ASSERT_TRUE(cftest::eventually([&] { return ra.counts().size() == 20; }));

    a.stop();
    const auto stopped = std::chrono::steady_clock::now();
    b.start();  // at once: no expiry to wait for
    ASSERT_TRUE(cftest::wait_running(b, 4, 20s));
    EXPECT_LT(std::chrono::steady_clock::now() - stopped, 20s);
    cluster().exec("INSERT INTO in_live (id, v) SELECT g, 'y' FROM generate_series(21, 40) g");
    ASSERT_TRUE(cftest::eventually([&] { return rb.counts().size() == 20; }));
    EXPECT_FALSE(rb.has("1"));  // the first instance's checkpoints hold
}

TEST(Instances, ANameIsFreeAtOnceWhenItsProcessWasKilled) {
    cftest::create_table(cluster(), "in_kill", 4);
    const std::string out = cftest::test_file("runner.out");
    // The runner's leases last ten minutes: a takeover within the test is the registry's doing.
    auto victim = cftest::processor_runner({cluster().conninfo(), "in_kill", "kill", "svc-k", out, "--lease-ms",
                                            "600000"});
    ASSERT_TRUE(victim.running());
    ASSERT_TRUE(cftest::eventually([] { return owned_by("in_kill", "svc-k") == 4; }));
    const int epoch_before =
        cluster()
            .exec("SELECT max(epoch) FROM changefeed.leases WHERE table_name = 'in_kill'::regclass")[0][0]
            .as<int>();

    cftest::Recorder rec;
    auto o = cftest::fast_options("svc-k");
    o.lease_duration = 600s;
    o.renew_interval = 1s;
    auto p = make("in_kill", "kill", rec.handler(), o);
    EXPECT_EQ(cftest::code_of([&] { p.start(); }), errc::instance_name_in_use);

    victim.kill_hard();  // no stop, no release
    // Its session ends as soon as the server sees the connection close.
    bool started = cftest::eventually([&] { return cftest::code_of([&] { p.start(); }) == std::error_code(); }, 10s);
    ASSERT_TRUE(started);
    ASSERT_TRUE(cftest::wait_running(p, 4, 10s));
    // The leases came back under a new epoch: the dead holder is fenced.
    EXPECT_GT(cluster()
                  .exec("SELECT min(epoch) FROM changefeed.leases WHERE table_name = 'in_kill'::regclass")[0][0]
                  .as<int>(),
              epoch_before);
    cluster().exec("INSERT INTO in_kill (id, v) SELECT g, 'x' FROM generate_series(1, 30) g");
    ASSERT_TRUE(cftest::eventually([&] { return rec.counts().size() == 30; }));
}

// A process with the default name that dies and is started again on the
// host gets its slot back, and with it its ranges, without waiting for its
// leases (ten minutes here) to expire; a second live process has its own slot.
TEST(Instances, ARestartedProcessWithTheDefaultNameTakesItsRangesBackAtOnce) {
    cftest::create_table(cluster(), "in_restart", 4);
    const std::string host = changefeed::default_instance_name();
    const std::string out = cftest::test_file("restart.out");
    auto first = cftest::processor_runner({cluster().conninfo(), "in_restart", "restart", "", out, "--lease-ms",
                                           "600000", "--renew-ms", "1000"});
    ASSERT_TRUE(cftest::eventually([&] { return owned_by("in_restart", host + "-1") == 4; }));
    auto second = cftest::processor_runner({cluster().conninfo(), "in_restart", "restart", "", out, "--lease-ms",
                                            "600000", "--renew-ms", "1000"});
    const auto live = [] {
        std::set<std::string> names;
        for (const auto& row :
             cluster().exec("SELECT instance FROM changefeed.instances('in_restart', 'restart') WHERE live"))
            names.insert(row[0].as<std::string>());
        return names;
    };
    ASSERT_TRUE(cftest::eventually([&] { return live() == std::set<std::string>{host + "-1", host + "-2"}; }));

    first.kill_hard();  // no stop, no release: its leases stay for ten minutes
    const auto killed = std::chrono::steady_clock::now();
    // Its session ends as soon as the server sees the connection close.
    ASSERT_TRUE(cftest::eventually([&] { return live() == std::set<std::string>{host + "-2"}; }));
    auto again = cftest::processor_runner({cluster().conninfo(), "in_restart", "restart", "", out, "--lease-ms",
                                           "600000", "--renew-ms", "1000"});
    cluster().exec("INSERT INTO in_restart (id, v) SELECT g, 'x' FROM generate_series(1, 40) g");
    const auto handled = [&] {
        std::set<std::string> ids;
        std::istringstream in(cftest::slurp(out));
        for (std::string line; std::getline(in, line);) ids.insert(line);
        return ids.size();
    };
    ASSERT_TRUE(cftest::eventually([&] { return handled() == 40; }, 60s));
    const auto stall = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
    std::printf("restart with the default name: every change handled %lld ms after the kill\n",
                static_cast<long long>(stall.count()));
    EXPECT_EQ(live(), (std::set<std::string>{host + "-1", host + "-2"}));
    EXPECT_GE(owned_by("in_restart", host + "-1"), 1);
}

TEST(Instances, LeaseNotificationsFollowWhatTheInstanceHolds) {
    cftest::create_table(cluster(), "in_notify", 8);
    LeaseLog la, lb;
    auto oa = cftest::fast_options("a");
    auto ob = cftest::fast_options("b");
    oa.lease_duration = ob.lease_duration = 20s;
    oa.renew_interval = ob.renew_interval = 2s;
    la.hook(oa);
    lb.hook(ob);
    // A throwing callback is ignored.
    int thrown = 0;
    auto throwing = oa.on_lease_acquired;
    oa.on_lease_acquired = [&, throwing](int r) {
        throwing(r);
        ++thrown;
        throw std::runtime_error("ignored");
    };
    auto a = make("in_notify", "notify", cftest::noop_handler(), oa);
    a.start();
    ASSERT_TRUE(cftest::wait_running(a, 8));
    ASSERT_TRUE(cftest::eventually([&] { return la.held().size() == 8u; }));
    EXPECT_EQ(la.held(), as_set(a.owned_ranges()));
    EXPECT_EQ(la.count('r'), 0);
    EXPECT_EQ(a.state(), changefeed::State::running);

    auto b = make("in_notify", "notify", cftest::noop_handler(), ob);
    b.start();
    ASSERT_TRUE(cftest::wait_running(b, 4));
    ASSERT_TRUE(cftest::eventually([&] { return la.held().size() == 4u && lb.held().size() == 4u; }));
    EXPECT_EQ(la.count('r'), 4);  // moved to b by balancing
    EXPECT_EQ(la.held(), as_set(a.owned_ranges()));
    EXPECT_EQ(lb.held(), as_set(b.owned_ranges()));

    a.stop();
    EXPECT_TRUE(la.held().empty());
    EXPECT_EQ(la.count('a'), 8);
    EXPECT_EQ(la.count('r'), 8);
    EXPECT_GE(thrown, 8);
    ASSERT_TRUE(cftest::eventually([&] { return lb.held().size() == 8u; }));
    b.stop();
    EXPECT_TRUE(lb.held().empty());
}

// Cut off from the server, an instance whose name another live instance
// registered in the meantime stops, and leaves the newcomer's leases alone.
TEST(Instances, ANameTakenWhileCutOffStopsTheInstance) {
    cftest::create_table(cluster(), "in_cut", 4);
    cftest::ErrorLog errors;
    auto o = cftest::fast_options("svc-c");
    o.on_error = errors.sink();
    o.lease_duration = 600s;
    o.renew_interval = 300ms;
    o.reconnect_min = 2s;  // time for the newcomer to register
    o.reconnect_max = 4s;
    auto p = make("in_cut", "cut", cftest::noop_handler(), o);
    p.start();
    ASSERT_TRUE(cftest::wait_running(p, 4));

    pqxx::connection squatter(cluster().conninfo());
    {
        pqxx::nontransaction tx(squatter);
        tx.exec("SELECT pg_terminate_backend(i.backend_pid, 10000) FROM changefeed.instance i"
                " WHERE i.instance = 'svc-c'");
        tx.exec("SELECT changefeed.instance_register('in_cut', 'cut', 'svc-c', 'squatter')");
    }
    ASSERT_TRUE(cftest::eventually([&] { return errors.has(errc::instance_name_in_use); }));
    ASSERT_TRUE(cftest::eventually([&] { return p.state() == changefeed::State::stopped; }));
    p.stop();
    // Not released: the leases belong to the name's new holder.
    EXPECT_EQ(owned_by("in_cut", "svc-c"), 4);
    pqxx::nontransaction tx(squatter);
    EXPECT_EQ(tx.exec("SELECT count(*) FROM changefeed.instance WHERE instance = 'svc-c' AND token = 'squatter'")[0][0]
                  .as<int>(),
              1);
}

// The connections of a processor, counted in pg_stat_activity by the
// application_name of its connection string: its worker's, whose long poll
// is the wake-up, and the lease connection, which the processors of one
// process share per connection string (client/README.md, "Connections").
// A processor told not to long-poll LISTENs on a third.
TEST(Instances, ProcessorsOfOneProcessShareTheLeaseConnection) {
    cftest::create_table(cluster(), "in_conns", 4);
    auto count = [](const std::string& app) {
        return cluster()
            .exec("SELECT count(*) FROM pg_stat_activity WHERE application_name = '" + app + "'")[0][0]
            .as<int>();
    };
    auto on = [](const std::string& app) {
        return changefeed::Collection(cluster().conninfo() + " application_name=" + app, "in_conns");
    };
    cftest::Recorder a, b, c;
    auto pa = changefeed::make_processor(on("cf_shared"), "conns_a", a.handler(), cftest::fast_options("ia"));
    pa.start();
    ASSERT_TRUE(cftest::wait_running(pa, 4));
    EXPECT_TRUE(cftest::eventually([&] { return count("cf_shared") == 2; })) << count("cf_shared");
    // A second processor of this process on the same string adds its worker alone.
    auto pb = changefeed::make_processor(on("cf_shared"), "conns_b", b.handler(), cftest::fast_options("ib"));
    pb.start();
    ASSERT_TRUE(cftest::wait_running(pb, 4));
    EXPECT_TRUE(cftest::eventually([&] { return count("cf_shared") == 3; })) << count("cf_shared");
    // Without LISTEN, a commit still reaches both at once (the long poll wakes them).
    auto listen_opts = cftest::fast_options("ic");
    listen_opts.long_poll = false;
    auto pc = changefeed::make_processor(on("cf_listen"), "conns_c", c.handler(), listen_opts);
    pc.start();
    ASSERT_TRUE(cftest::wait_running(pc, 4));
    EXPECT_TRUE(cftest::eventually([&] { return count("cf_listen") == 3; })) << count("cf_listen");
    EXPECT_EQ(count("cf_shared"), 3);
    cluster().exec("INSERT INTO in_conns (id, v) SELECT g, 'x' FROM generate_series(1, 20) g");
    EXPECT_TRUE(cftest::eventually([&] { return a.size() == 20 && b.size() == 20 && c.size() == 20; }))
        << a.size() << " " << b.size() << " " << c.size();
    // The first to stop leaves the shared connection to the other; its name
    // is unregistered, its checkpoints stored.
    pa.stop();
    EXPECT_TRUE(cftest::eventually([&] { return count("cf_shared") == 2; })) << count("cf_shared");
    EXPECT_EQ(cluster().exec("SELECT count(*) FROM changefeed.instances('in_conns', 'conns_a')")[0][0].as<int>(), 0);
    cluster().exec("INSERT INTO in_conns (id, v) VALUES (21, 'x')");
    EXPECT_TRUE(cftest::eventually([&] { return b.size() == 21; })) << b.size();
    pb.stop();
    pc.stop();
    EXPECT_TRUE(cftest::eventually([&] { return count("cf_shared") + count("cf_listen") == 0; }));
    // Every change was checkpointed: restarted, a processor reads nothing again.
    cftest::Recorder again;
    auto pa2 = changefeed::make_processor(on("cf_shared"), "conns_a", again.handler(), cftest::fast_options("ia"));
    pa2.start();
    ASSERT_TRUE(cftest::wait_running(pa2, 4));
    cluster().exec("INSERT INTO in_conns (id, v) VALUES (22, 'x')");
    EXPECT_TRUE(cftest::eventually([&] { return again.has("22"); }));
    pa2.stop();
    EXPECT_EQ(again.size(), 2u);  // 21, which conns_a never saw, and 22
}

}  // namespace
