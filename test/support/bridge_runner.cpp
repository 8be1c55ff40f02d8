// Runs one bridge instance (test mapper, NATS JetStream publisher) in its own
// process until it is killed, so that tests can SIGKILL it mid-stream.
// After every publish() it appends one line to STATS:
//   "ok <acknowledged> <duplicates>"  or  "fail"
// (written and flushed before the batch is checkpointed, so a SIGKILL loses
// at most the line of a batch whose acknowledgements were still awaited).
//
// --hold-ms N: wait N ms after each confirmed publish before the batch is
// checkpointed, so that a SIGKILL often falls between the two (the bridge's
// crash window: the next instance publishes the batch again).
//
//   cf_bridge_runner CONNINFO TABLE NAME INSTANCE NATS_URL PREFIX STREAM STATS [--batch N] [--hold-ms N]
#include "support/fast_options.hpp"
#include "support/test_mapper.hpp"

#include <changefeed/changefeed.hpp>
#include <changefeed/nats_publisher.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

namespace {

// Counts what each publish() of the bridge got back.
class CountingPublisher : public changefeed::Publisher {
public:
    CountingPublisher(changefeed::NatsPublisher& inner, FILE* out, int hold_ms)
        : inner_(inner), out_(out), hold_ms_(hold_ms) {}
    void publish(const std::vector<changefeed::Envelope>& envelopes) override {
        {
            std::lock_guard lock(mu_);
            auto acked = inner_.published(), dups = inner_.duplicates();
            try {
                inner_.publish(envelopes);
            } catch (...) {
                std::fprintf(out_, "fail\n");
                std::fflush(out_);
                throw;
            }
            std::fprintf(out_, "ok %lld %lld\n", static_cast<long long>(inner_.published() - acked),
                         static_cast<long long>(inner_.duplicates() - dups));
            std::fflush(out_);
        }
        if (hold_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms_));
    }

private:
    changefeed::NatsPublisher& inner_;
    FILE* out_;
    int hold_ms_;
    std::mutex mu_;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 9) {
        std::fprintf(stderr,
                     "usage: cf_bridge_runner CONNINFO TABLE NAME INSTANCE NATS_URL PREFIX STREAM STATS [--batch N]\n");
        return 2;
    }
    using namespace std::chrono_literals;
    changefeed::BridgeOptions o;
    o.instance_name = argv[4];
    cftest::set_fast_intervals(o);
    o.publish_retry_min = 50ms;
    o.publish_retry_max = 500ms;
    o.on_error = [](const changefeed::ErrorInfo&) {};  // failures are counted in STATS
    int hold_ms = 0;
    for (int i = 9; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--batch" && i + 1 < argc) o.max_batch_size = std::atoi(argv[++i]);
        else if (a == "--hold-ms" && i + 1 < argc) hold_ms = std::atoi(argv[++i]);
    }
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    FILE* out = std::fopen(argv[8], "a");
    if (!out) return 2;
    changefeed::NatsPublisher nats(
        {.url = argv[5], .subject_prefix = argv[6], .stream = argv[7], .ack_timeout = 2s, .connect_timeout = 500ms});
    CountingPublisher counting(nats, out, hold_ms);
    std::string table = argv[2];
    changefeed::Bridge bridge(changefeed::Collection(argv[1], table), argv[3], cftest::test_mapper("public." + table),
                              counting, o);
    bridge.start();
    int sig = 0;
    sigwait(&set, &sig);
    bridge.stop();
    return 0;
}
