// The NATS publisher in front of every broker state it may meet: a server
// without JetStream, a stream it cannot create, a stream of someone else's
// configuration, a server restarting mid-batch, a message the stream refuses.
// Each is Error(publish_failed), counted in failures(), and the next publish()
// works once the broker does: never a crash (a publisher that failed before
// its first asynchronous publish used to crash libnats 3.4 in disconnect()).
#include "support/cluster.hpp"
#include "support/nats_server.hpp"

#include <changefeed/bridge.hpp>
#include <changefeed/nats_publisher.hpp>

#include <atomic>
#include <set>
#include <thread>

using namespace std::chrono_literals;
using cftest::cluster;

CF_CLUSTER_ENVIRONMENT("nats_states", CF_TEST_PORT, true);

namespace {

std::vector<changefeed::Envelope> batch(const std::string& prefix, int from, int n) {
    std::vector<changefeed::Envelope> out;
    for (int i = from; i < from + n; ++i) {
        changefeed::Envelope e;
        e.id = prefix + "-" + std::to_string(i);
        e.table = "public.t";
        e.body = R"({"i":)" + std::to_string(i) + "}";
        out.push_back(std::move(e));
    }
    return out;
}

changefeed::NatsPublisherOptions options(const cftest::NatsServer& nats, bool create = true) {
    changefeed::NatsPublisherOptions o;
    o.url = nats.url();
    o.subject_prefix = "states";
    o.stream = "STATES";
    o.create_stream = create;
    o.ack_timeout = 2s;
    return o;
}

// What publish() threw: its code and message ("" and no code if it returned).
struct Outcome {
    std::error_code code;
    std::string what;
};
Outcome publish(changefeed::NatsPublisher& p, const std::vector<changefeed::Envelope>& envelopes) {
    try {
        p.publish(envelopes);
    } catch (const changefeed::Error& e) {
        return {e.code(), e.what()};
    }
    return {};
}
const std::error_code kFailed = make_error_code(changefeed::errc::publish_failed);

std::set<std::string> ids_in(const cftest::NatsServer& nats, const std::string& stream) {
    std::set<std::string> ids;
    for (const auto& m : cftest::read_stream(nats.url(), stream)) ids.insert(m.msg_id);
    return ids;
}

TEST(NatsBrokerStates, AServerWithoutJetStreamFailsThePublishThenAJetStreamServerTakesIt) {
    {
        cftest::NatsServer plain("states-plain", CF_NATS_PORT, false);
        plain.start();
        // The stream is looked up (create_stream) or the messages are sent
        // without a look-up: neither has anyone to answer.
        changefeed::NatsPublisher creating(options(plain, true));
        changefeed::NatsPublisher existing(options(plain, false));
        const Outcome a = publish(creating, batch("nojs", 1, 5));
        const Outcome b = publish(existing, batch("nojs", 1, 5));
        EXPECT_EQ(a.code, kFailed) << a.what;
        EXPECT_NE(a.what.find("JetStream"), std::string::npos) << a.what;
        EXPECT_EQ(b.code, kFailed) << b.what;
        EXPECT_EQ(publish(creating, batch("nojs", 1, 5)).code, kFailed);  // again: a retry fails the same way
        EXPECT_EQ(creating.failures(), 2);
        EXPECT_EQ(existing.failures(), 1);
        EXPECT_EQ(creating.published(), 0);
    }
    // The same port, now with JetStream (a broker whose JetStream became
    // ready): a new publisher connects and stores the batch.
    cftest::NatsServer js("states-js", CF_NATS_PORT);
    js.start();
    changefeed::NatsPublisher p(options(js));
    const Outcome ok = publish(p, batch("nojs", 1, 5));
    EXPECT_FALSE(ok.code) << ok.what;
    EXPECT_EQ(ids_in(js, "STATES").size(), 5u);
}

TEST(NatsBrokerStates, AStreamThatCannotBeCreatedOrIsMissingFailsThePublish) {
    cftest::NatsServer nats("states-create", CF_NATS_PORT);
    nats.start();
    // Another stream holds the publisher's subjects: the server refuses to
    // create STATES over them.
    cftest::add_stream(nats.url(), "OTHER", {"states.>"});
    changefeed::NatsPublisher creating(options(nats, true));
    const Outcome a = publish(creating, batch("nocreate", 1, 5));
    EXPECT_EQ(a.code, kFailed) << a.what;
    EXPECT_NE(a.what.find("cannot create stream STATES"), std::string::npos) << a.what;
    EXPECT_EQ(publish(creating, batch("nocreate", 1, 5)).code, kFailed);
    EXPECT_EQ(creating.failures(), 2);
    const auto names = cftest::stream_names(nats.url());
    EXPECT_EQ(std::count(names.begin(), names.end(), "STATES"), 0);

    // create_stream = false and no stream takes the subjects (a second
    // server, so OTHER does not take them): refused, not dropped.
    cftest::NatsServer empty("states-missing", CF_NATS_PORT + 1);
    empty.start();
    changefeed::NatsPublisher existing(options(empty, false));
    const Outcome b = publish(existing, batch("missing", 1, 5));
    EXPECT_EQ(b.code, kFailed) << b.what;
    EXPECT_EQ(existing.published(), 0);
    EXPECT_TRUE(cftest::stream_names(empty.url()).empty());
}

TEST(NatsBrokerStates, AStreamOfAConflictingConfigurationFailsThePublish) {
    cftest::NatsServer nats("states-conflict", CF_NATS_PORT);
    nats.start();
    // STATES exists, made by someone else for other subjects: the publisher
    // uses an existing stream as it is, and its subjects reach no stream.
    cftest::add_stream(nats.url(), "STATES", {"elsewhere.>"});
    changefeed::NatsPublisher p(options(nats));
    const Outcome a = publish(p, batch("conflict", 1, 5));
    EXPECT_EQ(a.code, kFailed) << a.what;
    EXPECT_NE(a.what.find("5 of 5 envelopes refused"), std::string::npos) << a.what;
    EXPECT_EQ(cftest::stream_size(nats.url(), "STATES"), 0u);
    EXPECT_EQ(p.failures(), 1);
}

TEST(NatsBrokerStates, AMessageTheStreamRefusesFailsTheBatchEveryTime) {
    cftest::NatsServer nats("states-refused", CF_NATS_PORT);
    nats.start();
    // At most 3 messages, new ones refused: the 4th and 5th of the batch are.
    cftest::add_stream(nats.url(), "STATES", {"states.>"}, 3);
    changefeed::NatsPublisher p(options(nats));
    const Outcome a = publish(p, batch("refused", 1, 5));
    EXPECT_EQ(a.code, kFailed) << a.what;
    EXPECT_NE(a.what.find("2 of 5 envelopes refused"), std::string::npos) << a.what;
    // The retry: the first three are duplicates now, the last two refused again.
    const Outcome b = publish(p, batch("refused", 1, 5));
    EXPECT_EQ(b.code, kFailed) << b.what;
    EXPECT_EQ(p.duplicates(), 3);
    EXPECT_EQ(p.failures(), 2);
    EXPECT_EQ(ids_in(nats, "STATES"), (std::set<std::string>{"refused-1", "refused-2", "refused-3"}));
}

TEST(NatsBrokerStates, ABrokerRestartingMidBatchFailsBatchesUntilItIsBack) {
    cftest::NatsServer nats("states-restart", CF_NATS_PORT);
    nats.start();
    changefeed::NatsPublisher p(options(nats));
    ASSERT_FALSE(publish(p, batch("restart", 0, 1)).code);  // the stream exists
    // Batches of 200 back to back, each retried until it is acknowledged (as
    // the bridge does), while the broker stops and starts twice.
    constexpr int kBatches = 40, kSize = 200;
    std::atomic<int> done{0}, failed{0}, other{0};
    std::thread publisher([&] {
        for (int b = 0; b < kBatches; ++b) {
            for (int attempt = 0; attempt < 400; ++attempt) {
                const Outcome o = publish(p, batch("restart", 1 + b * kSize, kSize));
                if (!o.code) break;
                if (o.code == kFailed) ++failed;
                else ++other;
                std::this_thread::sleep_for(50ms);
            }
            ++done;
        }
    });
    for (int restart = 0; restart < 2; ++restart) {
        const int at = done;
        if (!cftest::eventually([&] { return done > at + 3; }, 60s)) {
            ADD_FAILURE() << "the publisher made no progress";
            break;
        }
        const int failed_before = failed;
        nats.stop();  // mid-batch: the publisher is always in one
        // Down until a batch failed on it.
        EXPECT_TRUE(cftest::eventually([&] { return failed > failed_before; }, 60s)) << "no batch failed";
        nats.start();
    }
    publisher.join();
    EXPECT_EQ(other.load(), 0);
    EXPECT_GE(failed.load(), 2);  // at least the batch in flight at each stop
    EXPECT_EQ(p.failures(), failed.load());
    // Every batch arrived, each envelope stored once (the duplicate window
    // dropped what a failed batch had stored before its retry).
    const auto stored = cftest::read_stream(nats.url(), "STATES");
    std::set<std::string> ids;
    for (const auto& m : stored) ids.insert(m.msg_id);
    EXPECT_EQ(ids.size(), static_cast<std::size_t>(kBatches * kSize + 1));
    EXPECT_EQ(stored.size(), ids.size());
}

// The bridge over a broker without JetStream: it retries (state resuming, the
// checkpoint still), and once JetStream is there every change arrives.
TEST(NatsBrokerStates, TheBridgeRetriesUntilJetStreamIsThere) {
    const std::string table = "nbs_bridge";
    cftest::create_table(cluster(), table, 2);
    std::atomic<int> failures{0};
    changefeed::BridgeOptions o(changefeed::AllVersionsOptions(cftest::fast_options("one")));
    o.publish_retry_min = 50ms;
    o.publish_retry_max = 200ms;
    o.on_error = [&](const changefeed::ErrorInfo& e) {
        if (e.code == make_error_code(changefeed::errc::publish_failed)) ++failures;
    };
    auto plain = std::make_unique<cftest::NatsServer>("states-bridge-plain", CF_NATS_PORT, false);
    plain->start();
    changefeed::NatsPublisher nats(options(*plain));
    changefeed::Bridge bridge(changefeed::Collection(cluster().conninfo(), table), "to-nats",
                              changefeed::cloudevents_mapper({.database = "test"}), nats, o);
    bridge.start();
    ASSERT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
    cluster().exec("INSERT INTO " + table + " (id, v) SELECT g, 'x' FROM generate_series(1, 50) g");
    ASSERT_TRUE(cftest::eventually([&] { return failures >= 3; }));
    EXPECT_EQ(bridge.state(), changefeed::State::resuming);
    plain.reset();  // stopped
    cftest::NatsServer js("states-bridge-js", CF_NATS_PORT);
    js.start();
    ASSERT_TRUE(cftest::eventually([&] { return cftest::stream_size(js.url(), "STATES") == 50; }));
    EXPECT_TRUE(cftest::eventually([&] { return bridge.state() == changefeed::State::running; }));
    bridge.stop();
    EXPECT_EQ(cftest::stream_size(js.url(), "STATES"), 50u);
}

}  // namespace
