// A notification is only a hint to read now: the poll interval covers lost
// ones, so errors here never stop the processor.
#include "processor/listener.hpp"

#include "core/db.hpp"
#include "supervise/supervised_loop.hpp"

#include <pqxx/pqxx>

namespace changefeed::detail {
namespace {

class Receiver final : public pqxx::notification_receiver {
public:
    Receiver(pqxx::connection& c, const std::string& channel, std::function<void()>& wake)
        : pqxx::notification_receiver(c, channel), wake_(wake) {}
    void operator()(const std::string&, int) override { wake_(); }

private:
    std::function<void()>& wake_;
};

}  // namespace

Listener::Listener(std::string conninfo, std::string channel, std::function<void()> wake,
                   std::chrono::milliseconds backoff_min, std::chrono::milliseconds backoff_max, Telemetry* telemetry)
    : conninfo_(std::move(conninfo)), channel_(std::move(channel)), wake_(std::move(wake)), backoff_min_(backoff_min),
      backoff_max_(backoff_max), telemetry_(telemetry) {}

Listener::~Listener() { stop(); }

void Listener::start() {
    stopping_ = false;
    thread_ = std::thread([this] { run(); });
}

void Listener::stop() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
}

void Listener::run() {
    // Sleeps in small steps so that stop() is not held up by the backoff.
    SupervisedLoop loop(backoff_min_, backoff_max_, [this](std::chrono::milliseconds delay) {
        for (auto slept = std::chrono::milliseconds(0); slept < delay && !stopping_;
             slept += std::chrono::milliseconds(50))
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return stopping_.load();
    });
    loop.run([this] { return stopping_.load(); },
             [&] {
                 auto conn = connect(conninfo_);
                 Receiver receiver(*conn, channel_, wake_);
                 conn->get_notifs();  // makes the LISTEN take effect now
                 loop.succeeded();
                 if (telemetry_) telemetry_->connected(ConnectionRole::listener);
                 wake_();  // whatever was notified while we were not listening
                 while (!stopping_) {
                     // Short waits so that stop() is noticed quickly.
                     conn->await_notification(0, 200000);
                     if (!conn->is_open()) throw Error(errc::connection_failed, "listen connection closed");
                 }
                 return true;
             },
             [this](const Error& e, std::exception_ptr) {
                 if (telemetry_ && !stopping_) telemetry_->connection_lost(ConnectionRole::listener, e.what());
                 return AfterFailure::back_off;
             });
}

}  // namespace changefeed::detail
