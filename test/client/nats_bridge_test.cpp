// The bridge into NATS JetStream against a real PostgreSQL and a real
// nats-server: the stream holds exactly the committed changes in per-document
// order, redeliveries are dropped by the duplicate window, and a broker that
// is down pauses the bridge without moving its checkpoint.
#include "support/caught_up.hpp"
#include "support/cluster.hpp"
#include "support/nats_server.hpp"
#include "support/stream_check.hpp"
#include "support/test_mapper.hpp"

#include <changefeed/nats_publisher.hpp>

#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("nats_bridge", CF_TEST_PORT, true);

namespace {

// Transactions `from` .. `to`-1: each inserts document t and replaces document
// t / 2; every 25th deletes document t - 10.  Several versions per document.
void write_changes(const std::string& table, int from, int to) {
    pqxx::connection c(cluster().conninfo());
    for (int t = from; t < to; ++t) {
        pqxx::work w(c);
        w.exec("INSERT INTO " + table + " (id, v) VALUES (" + std::to_string(t) + ", 'new')");
        w.exec("UPDATE " + table + " SET v = 'v" + std::to_string(t) + "' WHERE id = " + std::to_string(t / 2));
        if (t % 25 == 0) w.exec("DELETE FROM " + table + " WHERE id = " + std::to_string(t - 10));
        w.commit();
    }
}

changefeed::BridgeOptions bridge_options(const std::string& instance) {
    changefeed::BridgeOptions o(changefeed::AllVersionsOptions(cftest::fast_options(instance)));
    o.publish_retry_min = 50ms;
    o.publish_retry_max = 300ms;
    o.on_error = [](const changefeed::ErrorInfo&) {};
    return o;
}

changefeed::Envelope envelope(const std::string& id, const std::string& table = "public.t") {
    changefeed::Envelope e;
    e.id = id;
    e.table = table;
    e.body = R"({"doc":"1","seq":1})";
    return e;
}

std::string checkpoint(const std::string& table, const std::string& processor) {
    return cluster()
        .exec("SELECT string_agg(checkpoint, ',' ORDER BY range_id) FROM changefeed.leases"
              " WHERE table_name = '" +
              table + "'::regclass AND processor = '" + processor + "'")[0][0]
        .as<std::string>("");
}

std::int64_t pending(const std::string& table, const std::string& processor) {
    return cluster()
        .exec("SELECT coalesce(sum(pending), 0) FROM changefeed.lag('" + table + "', '" + processor + "')")[0][0]
        .as<std::int64_t>();
}

TEST(NatsBridge, TheStreamHoldsExactlyTheCommittedChangesInOrder) {
    cftest::NatsServer nats("exact", CF_NATS_PORT);
    nats.start();
    const std::string table = "nb_exact";
    cftest::create_table(cluster(), table, 8);
    changefeed::NatsPublisher publisher({.url = nats.url(), .subject_prefix = "shop", .stream = "SHOP"});
    auto o = bridge_options("one");
    auto idle = std::make_shared<cftest::CaughtUp>();
    o.metrics = idle;
    changefeed::Bridge bridge({cluster().conninfo(), table}, "to-nats", cftest::test_mapper("public." + table),
                              publisher, o);
    bridge.start();
    ASSERT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));

    // Two writers, over 2000 changes.
    std::thread w1([&] { write_changes(table, 1, 700); });
    std::thread w2([&] { write_changes(table, 1000, 1700); });
    w1.join();
    w2.join();
    auto committed = cftest::committed_changes(cluster(), table);
    ASSERT_GT(committed.size(), 2000u);
    ASSERT_TRUE(cftest::eventually([&] { return cftest::stream_size(nats.url(), "SHOP") >= committed.size(); }, 120s))
        << cftest::stream_size(nats.url(), "SHOP") << " of " << committed.size();
    // Anything extra would have been published before each range read again
    // and found nothing waiting.
    const auto reads = idle->by_range();
    ASSERT_TRUE(cftest::eventually([&] { return idle->all_again(reads, 8); }));
    auto stored = cftest::read_stream(nats.url(), "SHOP");
    auto r = cftest::check_stream(committed, stored);
    EXPECT_TRUE(r.ok()) << r;
    EXPECT_EQ(r.stored, r.changes) << r;
    for (const auto& m : stored) {
        ASSERT_EQ(m.subject, "shop.public." + table);
        ASSERT_EQ(m.headers.at("Content-Type"), "application/json");
        ASSERT_FALSE(m.headers.at("Changefeed-Doc").empty());
    }
    EXPECT_EQ(publisher.published(), static_cast<std::int64_t>(committed.size()));
    EXPECT_EQ(bridge.stats().published, static_cast<std::int64_t>(committed.size()));
    std::cout << "nats-exact: changes=" << r.changes << " stored=" << r.stored
              << " duplicates_dropped=" << publisher.duplicates() << " publish_failures=" << publisher.failures()
              << "\n";
    bridge.stop();
}

TEST(NatsBridge, AStreamPerTableHoldsItsTablesSubjects) {
    cftest::NatsServer nats("per_table", CF_NATS_PORT);
    nats.start();
    cftest::create_table(cluster(), "nb_left", 4);
    cftest::create_table(cluster(), "nb_right", 4);
    changefeed::NatsPublisher publisher({.url = nats.url(),
                                         .subject_prefix = "cf",
                                         .layout = changefeed::StreamLayout::stream_per_table,
                                         .stream = "CF"});
    changefeed::Bridge left({cluster().conninfo(), "nb_left"}, "to-nats", cftest::test_mapper("public.nb_left"),
                            publisher, bridge_options("one"));
    changefeed::Bridge right({cluster().conninfo(), "nb_right"}, "to-nats", cftest::test_mapper("public.nb_right"),
                             publisher, bridge_options("one"));
    left.start();
    right.start();
    write_changes("nb_left", 1, 60);
    write_changes("nb_right", 1, 40);
    auto cl = cftest::committed_changes(cluster(), "nb_left");
    auto cr = cftest::committed_changes(cluster(), "nb_right");
    ASSERT_TRUE(cftest::eventually([&] {
        return cftest::stream_size(nats.url(), "CF_public_nb_left") >= cl.size() &&
               cftest::stream_size(nats.url(), "CF_public_nb_right") >= cr.size();
    }));
    auto sl = cftest::read_stream(nats.url(), "CF_public_nb_left");
    auto sr = cftest::read_stream(nats.url(), "CF_public_nb_right");
    EXPECT_TRUE(cftest::check_stream(cl, sl).ok()) << cftest::check_stream(cl, sl);
    EXPECT_TRUE(cftest::check_stream(cr, sr).ok()) << cftest::check_stream(cr, sr);
    for (const auto& m : sl) ASSERT_EQ(m.subject, "cf.public.nb_left");
    for (const auto& m : sr) ASSERT_EQ(m.subject, "cf.public.nb_right");
    auto names = cftest::stream_names(nats.url());
    std::sort(names.begin(), names.end());
    EXPECT_EQ(names, (std::vector<std::string>{"CF_public_nb_left", "CF_public_nb_right"}));
    EXPECT_EQ(publisher.stream_for(envelope("x", "public.nb_left")), "CF_public_nb_left");
}

TEST(NatsBridge, RedeliveredEnvelopesAreDroppedByTheDuplicateWindow) {
    cftest::NatsServer nats("dup", CF_NATS_PORT);
    nats.start();
    changefeed::NatsPublisher publisher({.url = nats.url(), .subject_prefix = "dup", .stream = "DUP"});
    std::vector<changefeed::Envelope> batch;
    for (int i = 0; i < 50; ++i) batch.push_back(envelope("e" + std::to_string(i)));
    publisher.publish(batch);
    EXPECT_EQ(publisher.duplicates(), 0);
    publisher.publish(batch);  // a redelivery: the same ids
    batch.push_back(envelope("e50"));
    publisher.publish(batch);
    EXPECT_EQ(publisher.published(), 151);
    EXPECT_EQ(publisher.duplicates(), 100);
    EXPECT_EQ(cftest::stream_size(nats.url(), "DUP"), 51u);
    // Across a broker restart too: the window is rebuilt from the store, and
    // the publisher connects anew.
    nats.restart();
    publisher.publish(batch);
    EXPECT_EQ(publisher.duplicates(), 151);
    EXPECT_EQ(cftest::stream_size(nats.url(), "DUP"), 51u);
    EXPECT_EQ(publisher.subject_for(envelope("x", "public.orders")), "dup.public.orders");
}

TEST(NatsBridge, PublishFailsWhileTheBrokerIsDownAndOptionsAreChecked) {
    cftest::NatsServer nats("down", CF_NATS_PORT);  // not started
    changefeed::NatsPublisher publisher({.url = nats.url(), .connect_timeout = 300ms});
    EXPECT_EQ(cftest::code_of([&] { publisher.publish({envelope("a")}); }), changefeed::errc::publish_failed);
    EXPECT_EQ(publisher.failures(), 1);
    EXPECT_EQ(publisher.published(), 0);
    nats.start();
    publisher.publish({envelope("a")});  // connects anew
    EXPECT_EQ(publisher.published(), 1);
    // An envelope outside every stream is refused, not lost silently.
    auto stray = envelope("b");
    stray.subject = "elsewhere.x";
    EXPECT_EQ(cftest::code_of([&] { publisher.publish({stray}); }), changefeed::errc::publish_failed);
    EXPECT_EQ(cftest::code_of([&] { publisher.publish({envelope("")}); }), changefeed::errc::publish_failed);

    using O = changefeed::NatsPublisherOptions;
    auto invalid = [](O o) { return cftest::code_of([&] { changefeed::NatsPublisher p(o); }); };
    EXPECT_EQ(invalid(O{.url = ""}), changefeed::errc::invalid_option);
    EXPECT_EQ(invalid(O{.subject_prefix = "a.*"}), changefeed::errc::invalid_option);
    EXPECT_EQ(invalid(O{.stream = "A.B"}), changefeed::errc::invalid_option);
    EXPECT_EQ(invalid(O{.duplicate_window = 0ms}), changefeed::errc::invalid_option);
    EXPECT_EQ(invalid(O{.ack_timeout = 0ms}), changefeed::errc::invalid_option);
}

TEST(NatsBridge, ABrokerThatIsDownPausesTheRangeWithoutMovingTheCheckpoint) {
    cftest::NatsServer nats("paused", CF_NATS_PORT);
    nats.start();
    const std::string table = "nb_paused";
    cftest::create_table(cluster(), table, 1);
    changefeed::NatsPublisher publisher(
        {.url = nats.url(), .subject_prefix = "p", .stream = "P", .ack_timeout = 1s, .connect_timeout = 300ms});
    changefeed::Bridge bridge({cluster().conninfo(), table}, "paused", cftest::test_mapper("public." + table),
                              publisher, bridge_options("one"));
    bridge.start();
    ASSERT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
    write_changes(table, 1, 6);
    const auto before = cftest::committed_changes(cluster(), table).size();
    ASSERT_TRUE(cftest::eventually([&] { return cftest::stream_size(nats.url(), "P") == before; }));
    ASSERT_TRUE(cftest::eventually([&] { return pending(table, "paused") == 0; }));

    nats.stop();
    write_changes(table, 6, 16);  // written while the broker is down
    const auto total = cftest::committed_changes(cluster(), table).size();
    ASSERT_GT(total, before);
    ASSERT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::resuming; }));
    ASSERT_TRUE(cftest::eventually([&] { return bridge.stats().publish_failures >= 2; }));
    const std::string held = checkpoint(table, "paused");
    // Three more failed publishes: each the point where a checkpoint would follow.
    const auto failures = bridge.stats().publish_failures;
    ASSERT_TRUE(cftest::eventually([&] { return bridge.stats().publish_failures >= failures + 3; }));
    EXPECT_EQ(checkpoint(table, "paused"), held) << "no checkpoint while the broker is down";
    EXPECT_EQ(pending(table, "paused"), static_cast<std::int64_t>(total - before));
    EXPECT_EQ(bridge.state(), changefeed::State::resuming);

    nats.start();
    ASSERT_TRUE(cftest::eventually([&] { return cftest::stream_size(nats.url(), "P") == total; }));
    ASSERT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
    ASSERT_TRUE(cftest::eventually([&] { return pending(table, "paused") == 0; }));
    EXPECT_NE(checkpoint(table, "paused"), held);
    auto r = cftest::check_stream(cftest::committed_changes(cluster(), table), cftest::read_stream(nats.url(), "P"));
    EXPECT_TRUE(r.ok()) << r;
    EXPECT_EQ(r.stored, total);
}

}  // namespace
