// The bridge into NATS JetStream: changes per second from a backlog through
// the bridge (read, map, publish, await acknowledgements, checkpoint), beside
// a raw loop publishing the same envelopes with the same publisher (the
// broker's limit for this client).  Prints two lines, "bridge N SECS RATE
// MEAN_BATCH" and "raw N SECS RATE".
//
//   bridge_nats CONNINFO TABLE NATS_URL EXPECTED
//
// The bridge's leases ("to-nats") must exist before the backlog was written
// (changefeed.lease_init), so that it starts before the backlog.
#include <changefeed/changefeed.hpp>
#include <changefeed/nats_publisher.hpp>

#include <boost/json.hpp>

#include <atomic>
#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// The envelope of the benchmark: the change's event id, a JSON body with the
// document id, the operation, the log sequence and the document.
changefeed::Envelope to_envelope(const changefeed::Change& c, const std::string& table) {
    boost::json::object body;
    body["id"] = c.event_id;
    body["doc"] = c.doc_id;
    body["op"] = changefeed::to_string(c.operation);
    body["seq"] = c.seq;
    body["data"] = c.current;
    changefeed::Envelope e;
    e.id = c.event_id;
    e.table = table;
    e.body = boost::json::serialize(body);
    return e;
}

// Counts the bridge's send() calls (the batch size it reaches) and passes
// them on, pipelined as the publisher it wraps.
class CountingPublisher : public changefeed::PipelinedPublisher {
public:
    explicit CountingPublisher(changefeed::PipelinedPublisher& inner) : inner_(inner) {}
    void send(const std::vector<changefeed::Envelope>& envelopes) override {
        inner_.send(envelopes);
        ++calls;
    }
    void confirm() override { inner_.confirm(); }
    std::atomic<long> calls{0};

private:
    changefeed::PipelinedPublisher& inner_;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::cerr << "usage: bridge_nats CONNINFO TABLE NATS_URL EXPECTED\n";
        return 2;
    }
    std::string conninfo = argv[1], table = argv[2], url = argv[3];
    const long expected = std::stol(argv[4]);
    const std::string qualified = table.find('.') == std::string::npos ? "public." + table : table;
    try {
        // 1. The bridge drains the backlog; the envelopes it published are kept for the raw loop.
        std::mutex mu;
        std::vector<changefeed::Envelope> sent;
        sent.reserve(static_cast<std::size_t>(expected));
        changefeed::NatsPublisher bridge_pub({.url = url, .subject_prefix = "bridge", .stream = "BRIDGE"});
        CountingPublisher counting(bridge_pub);
        changefeed::BridgeOptions o;
        o.instance_name = "bench";
        o.max_batch_size = 1000;
        o.poll_interval = std::chrono::milliseconds(200);
        o.acquire_interval = std::chrono::milliseconds(200);
        changefeed::Bridge bridge(
            changefeed::Collection(conninfo, table), "to-nats",
            [&](const changefeed::Change& c, const changefeed::Context&) {
                auto e = to_envelope(c, qualified);
                std::lock_guard lock(mu);
                sent.push_back(e);
                return std::vector<changefeed::Envelope>{std::move(e)};
            },
            counting, o);
        auto t0 = Clock::now();
        bridge.start();
        auto deadline = t0 + std::chrono::minutes(10);
        while (bridge.stats().published < expected && Clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        double bridge_secs = std::chrono::duration<double>(Clock::now() - t0).count();
        const long bridged = static_cast<long>(bridge.stats().published);
        bridge.stop();
        std::cout << "bridge " << bridged << " " << bridge_secs << " " << double(bridged) / bridge_secs << " "
                  << double(bridged) / double(std::max(1L, counting.calls.load())) << "\n";

        // 2. The same envelopes, in batches of the same size, by the same publisher class into a stream of its own.
        std::vector<changefeed::Envelope> envelopes;
        {
            std::lock_guard lock(mu);
            envelopes = std::move(sent);
        }
        changefeed::NatsPublisher raw_pub({.url = url, .subject_prefix = "raw", .stream = "RAW"});
        raw_pub.publish({envelopes.front()});  // connects and creates the stream outside the timing
        auto t1 = Clock::now();
        for (std::size_t i = 1; i < envelopes.size(); i += 1000) {
            std::vector<changefeed::Envelope> batch(
                envelopes.begin() + static_cast<std::ptrdiff_t>(i),
                envelopes.begin() + static_cast<std::ptrdiff_t>(std::min(envelopes.size(), i + 1000)));
            raw_pub.publish(batch);
        }
        double raw_secs = std::chrono::duration<double>(Clock::now() - t1).count();
        long raw = static_cast<long>(envelopes.size()) - 1;
        std::cout << "raw " << raw << " " << raw_secs << " " << double(raw) / raw_secs << "\n";
        return bridged >= expected && raw_pub.duplicates() == 0 ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "bridge_nats: " << e.what() << "\n";
        return 1;
    }
}
