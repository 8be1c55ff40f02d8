// A connection LISTENing on the channels of some tables' collections, for the
// tests of the wake-ups themselves.  Its bounds are scaled (timing.hpp).
#pragma once

#include "support/cluster.hpp"

#include <pqxx/pqxx>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace cftest {

struct Received {
    std::string channel;
    int pid;
};

class Listening {
public:
    Listening(Cluster& c, const std::vector<std::string>& tables) : conn_(c.conninfo()) {
        for (const auto& t : tables) {
            pqxx::nontransaction tx(conn_);
            auto channel = tx.exec("SELECT channel FROM changefeed.collections WHERE table_name = '" + t +
                                   "'::regclass")[0][0]
                               .as<std::string>();
            channels_[t] = channel;
            receivers_.push_back(std::make_unique<Receiver>(conn_, channel, got_));
        }
        conn_.get_notifs();
    }

    // Waits until `pred` holds over what arrived (or the timeout passed).
    bool wait(const std::function<bool(const std::vector<Received>&)>& pred,
              std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
        const auto deadline = std::chrono::steady_clock::now() + scaled(timeout);
        while (!pred(got_) && std::chrono::steady_clock::now() < deadline) conn_.await_notification(0, 50000);
        return pred(got_);
    }
    // Waits for a first notification.
    bool wait_any(std::chrono::milliseconds timeout) {
        return wait([](const std::vector<Received>& got) { return !got.empty(); }, timeout);
    }

    // Collects whatever else arrives within `quiet`.
    void drain(std::chrono::milliseconds quiet) {
        const auto deadline = std::chrono::steady_clock::now() + scaled(quiet);
        while (std::chrono::steady_clock::now() < deadline) conn_.await_notification(0, 50000);
    }

    std::size_t count(const std::string& table) const {
        std::size_t n = 0;
        for (const auto& r : got_) n += r.channel == channels_.at(table);
        return n;
    }
    const std::vector<Received>& got() const { return got_; }

private:
    class Receiver final : public pqxx::notification_receiver {
    public:
        Receiver(pqxx::connection& c, const std::string& channel, std::vector<Received>& out)
            : pqxx::notification_receiver(c, channel), out_(out) {}
        void operator()(const std::string&, int pid) override { out_.push_back({channel(), pid}); }

    private:
        std::vector<Received>& out_;
    };

    pqxx::connection conn_;
    std::map<std::string, std::string> channels_;
    std::vector<std::unique_ptr<Receiver>> receivers_;
    std::vector<Received> got_;
};

}  // namespace cftest
