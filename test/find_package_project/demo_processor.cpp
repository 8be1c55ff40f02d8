// The demo's processor, built against the installed client: reads a table's
// feed from a position with an all-versions processor and prints each change
// as "operation doc_id document" until COUNT changes came or TIMEOUT passed.
//
//   demo_processor CONNINFO TABLE POSITION COUNT TIMEOUT_SECONDS
//
// Exit status: 0 when COUNT changes were handled, 1 on timeout, 2 on errors.
#include <changefeed/changefeed.hpp>

#include <boost/json/serialize.hpp>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <string>

int main(int argc, char** argv) {
    if (argc != 6) {
        std::cerr << "usage: demo_processor CONNINFO TABLE POSITION COUNT TIMEOUT_SECONDS\n";
        return 2;
    }
    const long count = std::stol(argv[4]);
    std::mutex mu;
    std::condition_variable cv;
    long handled = 0;
    changefeed::AllVersionsOptions options;
    options.start_position = argv[3];
    options.poll_interval = std::chrono::seconds(1);
    options.maintain_interval = std::chrono::milliseconds(0);
    options.on_error = [](const changefeed::ErrorInfo& e) { std::cerr << "error: " << e.message << "\n"; };
    try {
        auto processor = changefeed::make_processor(
            changefeed::Collection(argv[1], argv[2]), "package-demo",
            [&](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
                std::lock_guard lock(mu);
                for (const auto& change : batch) {
                    std::cout << changefeed::to_string(change.operation) << " " << change.doc_id << " "
                              << boost::json::serialize(change.current) << "\n";
                    ++handled;
                }
                std::cout.flush();
                cv.notify_all();
            },
            options);
        processor.start();
        std::unique_lock lock(mu);
        bool done = cv.wait_for(lock, std::chrono::seconds(std::stol(argv[5])), [&] { return handled >= count; });
        lock.unlock();
        processor.stop();
        return done ? 0 : 1;
    } catch (const changefeed::Error& e) {
        std::cerr << "demo_processor: " << e.what() << "\n";
        return 2;
    }
}
