// Test harness: a real nats-server with JetStream in a scratch folder, as the
// suites' PostgreSQL clusters are, and a reader of a stream's messages.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cftest {

class NatsServer {
public:
    // The server's store and log live in CF_TEST_DIR-nats-<name> (emptied on
    // construction); it listens on 127.0.0.1:<port>.
    // jetstream = false: a server without JetStream (no -js), as a broker
    // configured without it, or not ready yet, looks to a publisher.
    NatsServer(std::string name, int port, bool jetstream = true);
    ~NatsServer();  // stop()
    NatsServer(const NatsServer&) = delete;
    NatsServer& operator=(const NatsServer&) = delete;

    // Starts `nats-server -js -sd <dir>/store -p <port>` (without -js when
    // constructed so) and waits until it accepts connections (and JetStream
    // answers).  Throws std::runtime_error if it does not.
    void start();
    // Stops it gracefully (SIGTERM: the store is flushed) and waits for it.
    void stop();
    // stop() then start(), on the same store: streams and messages survive.
    void restart();
    bool running() const { return pid_ > 0; }
    std::string url() const { return "nats://127.0.0.1:" + std::to_string(port_); }
    int port() const { return port_; }

private:
    std::string dir_;
    int port_;
    bool jetstream_;
    pid_t pid_ = -1;
};

// One message of a stream as stored.
struct StoredMessage {
    std::uint64_t seq = 0;
    std::string subject;
    std::string msg_id;  // the Nats-Msg-Id header
    std::map<std::string, std::string> headers;
    std::string data;
};

// Every message of `stream`, in stream order (by sequence).  Throws
// std::runtime_error if the server or the stream cannot be reached.
std::vector<StoredMessage> read_stream(const std::string& url, const std::string& stream);
// The number of messages `stream` holds (0 if it does not exist or the server is down).
std::uint64_t stream_size(const std::string& url, const std::string& stream);
// The names of the server's streams.
std::vector<std::string> stream_names(const std::string& url);

// A stream made by someone else than the publisher, to put the publisher in
// front of a broker it did not configure: `subjects`, file storage, and when
// max_msgs >= 0 at most that many messages with new ones refused (discard new).
// Throws std::runtime_error if the server refuses it.
void add_stream(const std::string& url, const std::string& name, const std::vector<std::string>& subjects,
                std::int64_t max_msgs = -1);

}  // namespace cftest
