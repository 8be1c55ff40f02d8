// Example: bridges a table's changes to NATS JetStream, then reads the stream
// back and prints what it holds.
//
//   bridge_to_nats CONNINFO TABLE NATS_URL [--count N] [--timeout SECONDS] [--prefix PREFIX]
//
// Runs a Bridge (all-versions feed) named "to-nats" that publishes each change
// as a CloudEvent to "<prefix>.<schema>.<table>" in the stream "<PREFIX>"
// (upper case), until the stream holds N messages or the timeout passed; then
// prints every message of the stream: sequence, subject, Nats-Msg-Id, body.
// Exit status: 0 when N messages arrived, 1 on timeout, 2 on bad arguments or errors.
#include <changefeed/changefeed.hpp>
#include <changefeed/nats_publisher.hpp>

#include <nats/nats.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

namespace {

// The messages of `stream` (by sequence) printed; returns how many it holds.
std::uint64_t stream_messages(const std::string& url, const std::string& stream, bool print) {
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    std::uint64_t count = 0;
    if (natsConnection_ConnectTo(&nc, url.c_str()) != NATS_OK) return 0;
    if (natsConnection_JetStream(&js, nc, nullptr) == NATS_OK) {
        jsStreamInfo* si = nullptr;
        if (js_GetStreamInfo(&si, js, stream.c_str(), nullptr, nullptr) == NATS_OK) {
            count = si->State.Msgs;
            for (std::uint64_t seq = si->State.FirstSeq; print && seq <= si->State.LastSeq; ++seq) {
                natsMsg* m = nullptr;
                if (js_GetMsg(&m, js, stream.c_str(), seq, nullptr, nullptr) != NATS_OK) continue;
                const char* id = "";
                natsMsgHeader_Get(m, "Nats-Msg-Id", &id);
                std::printf("#%llu %s  Nats-Msg-Id: %s\n    %.*s\n", static_cast<unsigned long long>(seq),
                            natsMsg_GetSubject(m), id, natsMsg_GetDataLength(m), natsMsg_GetData(m));
                natsMsg_Destroy(m);
            }
            jsStreamInfo_Destroy(si);
        }
        jsCtx_Destroy(js);
    }
    natsConnection_Destroy(nc);
    return count;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 4) {
        std::cerr
            << "usage: bridge_to_nats CONNINFO TABLE NATS_URL [--count N] [--timeout SECONDS] [--prefix PREFIX]\n";
        return 2;
    }
    std::string conninfo = argv[1], table = argv[2], url = argv[3], prefix = "demo";
    long count = 5;
    double timeout = 30;
    for (int i = 4; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--count" && i + 1 < argc) count = std::stol(argv[++i]);
        else if (a == "--timeout" && i + 1 < argc) timeout = std::stod(argv[++i]);
        else if (a == "--prefix" && i + 1 < argc) prefix = argv[++i];
        else {
            std::cerr << "unknown argument " << a << "\n";
            return 2;
        }
    }
    std::string stream;
    for (char ch : prefix) stream += static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    try {
        changefeed::NatsPublisher nats({.url = url, .subject_prefix = prefix, .stream = stream});
        changefeed::BridgeOptions options;
        options.poll_interval = std::chrono::seconds(1);
        options.on_state_change = [](changefeed::State s) {
            std::cerr << "bridge state: " << changefeed::to_string(s) << "\n";
        };
        // CloudEvents 1.0: the change's event id as the envelope id (and Nats-Msg-Id).
        changefeed::Bridge bridge(changefeed::Collection(conninfo, table), "to-nats", changefeed::cloudevents_mapper(),
                                  nats, options);
        bridge.start();
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
        while (std::chrono::steady_clock::now() < deadline && bridge.stats().published < count)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        bridge.stop();
        auto stats = bridge.stats();
        std::printf("bridge: %lld changes mapped, %lld envelopes acknowledged (%lld as duplicates), "
                    "%lld failed publishes\n",
                    static_cast<long long>(stats.changes), static_cast<long long>(nats.published()),
                    static_cast<long long>(nats.duplicates()), static_cast<long long>(stats.publish_failures));
        std::printf("stream %s:\n", stream.c_str());
        std::uint64_t held = stream_messages(url, stream, true);
        return held >= static_cast<std::uint64_t>(count) ? 0 : 1;
    } catch (const std::exception& e) {
        std::cerr << "bridge_to_nats: " << e.what() << "\n";
        return 2;
    }
}
