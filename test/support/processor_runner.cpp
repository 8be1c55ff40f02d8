// Runs one processor instance in its own process until it is killed, so that
// tests can SIGKILL an instance.  Appends "doc_id" per handled change to OUT.
//
//   cf_processor_runner CONNINFO TABLE NAME INSTANCE OUT [--from-beginning] [--batch N] [--slow-ms N]
//                       [--lease-ms N] [--acquire-ms N] [--renew-ms N] [--all-versions]
//                       [--processors N] [--no-long-poll] [--poll-ms N]
// With --processors N it runs N processors, NAME-1 .. NAME-N, each its own
// instance INSTANCE (one process as a service with several processors runs).
// With --all-versions the processor is an all-versions one and each line is
// "doc_id v range epoch" (v: the row's column v).
#include <changefeed/changefeed.hpp>

#include "support/fast_options.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
    if (argc < 6) {
        std::fprintf(stderr, "usage: cf_processor_runner CONNINFO TABLE NAME INSTANCE OUT [options]\n");
        return 2;
    }
    using namespace std::chrono_literals;
    changefeed::LatestVersionOptions o;
    o.instance_name = argv[4];
    cftest::set_fast_intervals(o);
    int slow_ms = 0;
    bool all_versions = false;
    int processors = 0;
    for (int i = 6; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--from-beginning") o.start_from_beginning = true;
        else if (a == "--batch" && i + 1 < argc) o.max_batch_size = std::atoi(argv[++i]);
        else if (a == "--slow-ms" && i + 1 < argc) slow_ms = std::atoi(argv[++i]);
        else if (a == "--lease-ms" && i + 1 < argc) o.lease_duration = std::chrono::milliseconds(std::atoi(argv[++i]));
        else if (a == "--acquire-ms" && i + 1 < argc)
            o.acquire_interval = std::chrono::milliseconds(std::atoi(argv[++i]));
        else if (a == "--renew-ms" && i + 1 < argc) o.renew_interval = std::chrono::milliseconds(std::atoi(argv[++i]));
        else if (a == "--all-versions") all_versions = true;
        else if (a == "--processors" && i + 1 < argc) processors = std::atoi(argv[++i]);
        else if (a == "--no-long-poll") o.long_poll = false;
        else if (a == "--poll-ms" && i + 1 < argc) o.poll_interval = std::chrono::milliseconds(std::atoi(argv[++i]));
    }
    // Blocked before any thread starts, so that only sigwait() below gets them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    FILE* out = std::fopen(argv[5], "a");
    if (!out) return 2;
    auto handler = [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
        if (slow_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
        for (const auto& c : batch) {
            if (!all_versions) {
                std::fprintf(out, "%s\n", c.doc_id.c_str());
                continue;
            }
            std::string v = "-";
            if (const auto* obj = c.current.if_object())
                if (auto it = obj->find("v"); it != obj->end() && it->value().is_string())
                    v = std::string(it->value().as_string());
            std::fprintf(out, "%s %s %d %lld\n", c.doc_id.c_str(), v.c_str(), ctx.range_id,
                         static_cast<long long>(ctx.lease_epoch));
        }
        std::fflush(out);
    };
    std::vector<changefeed::Processor> running;
    for (int k = 1; k <= std::max(1, processors); ++k) {
        const std::string name = processors > 0 ? std::string(argv[3]) + "-" + std::to_string(k) : argv[3];
        running.push_back(changefeed::make_processor(changefeed::Collection(argv[1], argv[2]), name, handler,
                                                     all_versions
                                                         ? changefeed::FeedOptions(changefeed::AllVersionsOptions(
                                                               static_cast<const changefeed::ProcessorOptions&>(o)))
                                                         : changefeed::FeedOptions(o)));
        running.back().start();
    }
    int sig = 0;
    sigwait(&set, &sig);
    for (auto& p : running) p.stop();
    return 0;
}
