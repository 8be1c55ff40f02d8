// Runs one subscription in its own process: prints "doc_id" per change it
// receives, flushed, until COUNT changes came or SECONDS passed; "ready" on
// stderr once subscribed (a subscription sees what commits after that).
//
//   cf_subscription_runner CONNINFO TABLE COUNT SECONDS [--poll-ms N]
//
// Exit status: 0 when COUNT changes came, 1 when the time ran out first, 2 on errors.
#include <changefeed/changefeed.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

int main(int argc, char** argv) {
    if (argc < 5) {
        std::fprintf(stderr, "usage: cf_subscription_runner CONNINFO TABLE COUNT SECONDS [--poll-ms N]\n");
        return 2;
    }
    changefeed::SubscriptionOptions o;
    for (int i = 5; i + 1 < argc; i += 2)
        if (std::string(argv[i]) == "--poll-ms") o.poll_interval = std::chrono::milliseconds(std::atoi(argv[i + 1]));
    const long want = std::atol(argv[3]);
    try {
        auto sub = changefeed::subscribe(changefeed::Collection(argv[1], argv[2]), o);
        std::fprintf(stderr, "ready\n");
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::atoi(argv[4]));
        long got = 0;
        while (got < want && std::chrono::steady_clock::now() < deadline) {
            if (auto c = sub.try_next()) {
                std::printf("%s\n", c->doc_id.c_str());
                std::fflush(stdout);
                ++got;
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        return got >= want ? 0 : 1;
    } catch (const changefeed::Error& e) {
        std::fprintf(stderr, "cf_subscription_runner: %s\n", e.what());
        return 2;
    }
}
