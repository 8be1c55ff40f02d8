// Internal: LISTEN on a dedicated connection; wakes the reader on every
// notification of the collection's channel, reconnecting with backoff.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace changefeed::detail {

class Telemetry;

class Listener {
public:
    // `telemetry`, if given, is told when the connection drops and comes back.
    Listener(std::string conninfo, std::string channel, std::function<void()> wake,
             std::chrono::milliseconds backoff_min, std::chrono::milliseconds backoff_max,
             Telemetry* telemetry = nullptr);
    ~Listener();
    void start();
    void stop();

private:
    void run();

    std::string conninfo_;
    std::string channel_;
    std::function<void()> wake_;
    std::chrono::milliseconds backoff_min_, backoff_max_;
    Telemetry* telemetry_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

}  // namespace changefeed::detail
