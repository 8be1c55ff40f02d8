// Example service with metrics: a latest-version processor on a table whose
// measurements are served to Prometheus at http://ADDRESS/metrics, and whose
// log records (started, leases, reconnects, errors, stopped) go to stderr as
// logfmt lines -- the default, shown here by leaving ProcessorOptions::log empty.
//
//   metrics_service CONNINFO TABLE [--name NAME] [--listen HOST:PORT] [--timeout SECONDS]
//
// --listen defaults to 127.0.0.1:9464 (port 0 takes a free one); the port is
// printed on stdout as "metrics on port N" once it listens.  Runs until
// SIGINT/SIGTERM or the timeout (default: none).
//
// Exit status: 0 after a clean stop, 2 for bad arguments or errors.
#include <changefeed/changefeed.hpp>
#include <changefeed/prometheus_metrics.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

namespace {

std::atomic<bool> interrupted{false};
void on_signal(int) { interrupted = true; }

int usage() {
    std::cerr << "usage: metrics_service CONNINFO TABLE [--name NAME] [--listen HOST:PORT] [--timeout SECONDS]\n";
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) return usage();
    const std::string conninfo = argv[1], table = argv[2];
    std::string name = "metrics-service", listen = "127.0.0.1:9464";
    double timeout = 0;
    for (int i = 3; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--name" && i + 1 < argc) name = argv[++i];
        else if (a == "--listen" && i + 1 < argc) listen = argv[++i];
        else if (a == "--timeout" && i + 1 < argc) timeout = std::stod(argv[++i]);
        else return usage();
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    try {
        auto metrics = std::make_shared<changefeed::PrometheusMetrics>();
        metrics->serve(listen);
        std::cout << "metrics on port " << metrics->port() << std::endl;

        changefeed::LatestVersionOptions options;
        options.metrics = metrics;
        auto processor = changefeed::make_processor(
            changefeed::Collection(conninfo, table), name,
            [](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
                for (const auto& change : batch)
                    std::cout << changefeed::to_string(change.operation) << " " << change.doc_id << "\n";
                std::cout.flush();
            },
            options);
        processor.start();
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
        while (!interrupted && (timeout <= 0 || std::chrono::steady_clock::now() < deadline))
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        processor.stop();
        return 0;
    } catch (const changefeed::Error& e) {
        std::cerr << "metrics_service: " << e.what() << " ("
                  << changefeed::to_string(static_cast<changefeed::errc>(e.code().value())) << ")\n";
        return 2;
    }
}
