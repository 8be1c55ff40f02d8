// Example service: runs a latest-version processor on a table and prints each
// change it handles, until it handled N changes or the timeout passed.
//
//   print_changes CONNINFO TABLE [--name NAME] [--count N] [--timeout SECONDS] [--poll SECONDS]
//                 [--from-beginning]
//
// Each change is printed with the wall-clock time the handler saw it.
//
// Exit status: 0 when N changes were handled (or the timeout passed without
// --count), 1 when the timeout passed first, 2 for bad arguments or errors.
#include <changefeed/changefeed.hpp>

#include <boost/json/serialize.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <mutex>
#include <string>

namespace {

std::atomic<bool> interrupted{false};
void on_signal(int) { interrupted = true; }

int usage() {
    std::cerr << "usage: print_changes CONNINFO TABLE [--name NAME] [--count N] [--timeout SECONDS]"
                 " [--poll SECONDS] [--from-beginning]\n";
    return 2;
}

// HH:MM:SS.mmm, local time.
std::string clock_time() {
    auto now = std::chrono::system_clock::now();
    std::time_t t = std::chrono::system_clock::to_time_t(now);
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    char buf[32];
    std::strftime(buf, sizeof buf, "%H:%M:%S", std::localtime(&t));
    char out[40];
    std::snprintf(out, sizeof out, "%s.%03d", buf, int(ms));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 3) return usage();
    std::string conninfo = argv[1], table = argv[2], name = "print-changes";
    long count = 0;
    double timeout = 30;
    double poll = 1;  // fallback only: LISTEN wakes the processor
    changefeed::LatestVersionOptions options;
    for (int i = 3; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--name" && i + 1 < argc) name = argv[++i];
        else if (a == "--count" && i + 1 < argc) count = std::stol(argv[++i]);
        else if (a == "--timeout" && i + 1 < argc) timeout = std::stod(argv[++i]);
        else if (a == "--poll" && i + 1 < argc) poll = std::stod(argv[++i]);
        else if (a == "--from-beginning") options.start_from_beginning = true;
        else return usage();
    }
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);

    std::mutex mu;
    std::condition_variable cv;
    long handled = 0;
    options.poll_interval = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::duration<double>(poll));
    options.on_error = [](const changefeed::ErrorInfo& e) {
        std::cerr << "error" << (e.range_id ? " on range " + std::to_string(*e.range_id) : "") << ": " << e.message
                  << "\n";
    };
    options.on_state_change = [](changefeed::State s) { std::cerr << "state: " << changefeed::to_string(s) << "\n"; };

    try {
        auto processor = changefeed::make_processor(
            changefeed::Collection(conninfo, table), name,
            [&](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) {
                std::lock_guard lock(mu);
                for (const auto& change : batch) {
                    std::cout << clock_time() << "  range " << ctx.range_id << " "
                              << changefeed::to_string(change.operation) << " " << change.doc_id << " "
                              << boost::json::serialize(change.current) << "\n";
                    ++handled;
                }
                std::cout.flush();
                cv.notify_all();
            },
            options);
        processor.start();
        std::cerr << "processor \"" << name << "\" started as instance \"" << processor.instance_name() << "\"\n";
        auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
        bool reached = false;
        {
            std::unique_lock lock(mu);
            while (!interrupted && std::chrono::steady_clock::now() < deadline) {
                if (count > 0 && handled >= count) {
                    reached = true;
                    break;
                }
                cv.wait_for(lock, std::chrono::milliseconds(200));
            }
        }
        processor.stop();
        std::cerr << "handled " << handled << " change(s)\n";
        return (count == 0 || reached) ? 0 : 1;
    } catch (const changefeed::Error& e) {
        std::cerr << "print_changes: " << e.what() << " (" << e.code().message() << ")\n";
        return 2;
    }
}
