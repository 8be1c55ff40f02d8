#include "support/nats_server.hpp"

#include "bridge/nats_stream.hpp"

#include <nats/nats.h>

#include <arpa/inet.h>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace cftest {
namespace {

bool accepts(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<std::uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

// A JetStream context on a fresh connection, destroyed with the object.
struct Js {
    explicit Js(const std::string& url) {
        natsOptions* o = nullptr;
        natsOptions_Create(&o);
        natsOptions_SetURL(o, url.c_str());
        natsOptions_SetAllowReconnect(o, false);
        natsOptions_SetTimeout(o, 2000);
        natsStatus s = natsConnection_Connect(&nc, o);
        natsOptions_Destroy(o);
        if (s != NATS_OK) throw std::runtime_error("cannot connect to " + url + ": " + natsStatus_GetText(s));
        jsOptions jo;
        jsOptions_Init(&jo);
        jo.Wait = 10000;
        if (natsConnection_JetStream(&js, nc, &jo) != NATS_OK) throw std::runtime_error("no JetStream context");
    }
    ~Js() {
        if (js) jsCtx_Destroy(js);
        if (nc) natsConnection_Destroy(nc);
    }
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
};

}  // namespace

NatsServer::NatsServer(std::string name, int port, bool jetstream)
    : dir_(std::string(CF_TEST_DIR) + "-nats-" + name), port_(port), jetstream_(jetstream) {
    std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "/store'").c_str());
}

NatsServer::~NatsServer() { stop(); }

void NatsServer::start() {
    if (running()) return;
    std::vector<std::string> args = {"nats-server",         "-a", "127.0.0.1",       "-p",
                                     std::to_string(port_), "-l", dir_ + "/nats.log"};
    if (jetstream_) args.insert(args.end(), {"-js", "-sd", dir_ + "/store"});
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, (dir_ + "/stderr").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    int rc = posix_spawnp(&pid_, "nats-server", &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
        pid_ = -1;
        throw std::runtime_error("cannot start nats-server (apt-get install nats-server)");
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
        if (accepts(port_) && !jetstream_) return;
        if (accepts(port_)) {
            // JetStream answers once the server accepts clients; make sure.
            try {
                Js j(url());
                jsAccountInfo* ai = nullptr;
                if (js_GetAccountInfo(&ai, j.js, nullptr, nullptr) == NATS_OK) {
                    jsAccountInfo_Destroy(ai);
                    return;
                }
            } catch (const std::exception&) {
            }
        }
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            throw std::runtime_error("nats-server exited at start; see " + dir_ + "/nats.log");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    stop();
    throw std::runtime_error("nats-server did not accept connections on port " + std::to_string(port_));
}

void NatsServer::stop() {
    if (!running()) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
}

void NatsServer::restart() {
    stop();
    start();
}

std::vector<StoredMessage> read_stream(const std::string& url, const std::string& stream) {
    Js j(url);
    jsStreamInfo* si = nullptr;
    natsStatus s = js_GetStreamInfo(&si, j.js, stream.c_str(), nullptr, nullptr);
    if (s != NATS_OK) throw std::runtime_error("no stream " + stream + ": " + natsStatus_GetText(s));
    std::uint64_t first = si->State.FirstSeq, last = si->State.LastSeq, msgs = si->State.Msgs;
    jsStreamInfo_Destroy(si);
    std::vector<StoredMessage> out;
    for (std::uint64_t seq = first; msgs > 0 && seq <= last; ++seq) {
        natsMsg* m = nullptr;
        jsErrCode code = static_cast<jsErrCode>(0);
        s = js_GetMsg(&m, j.js, stream.c_str(), seq, nullptr, &code);
        if (s == NATS_NOT_FOUND) continue;  // deleted
        if (s != NATS_OK)
            throw std::runtime_error("cannot read " + stream + " #" + std::to_string(seq) + ": " +
                                     natsStatus_GetText(s));
        StoredMessage sm;
        sm.seq = seq;
        sm.subject = natsMsg_GetSubject(m);
        sm.data.assign(natsMsg_GetData(m), static_cast<std::size_t>(natsMsg_GetDataLength(m)));
        const char** keys = nullptr;
        int n = 0;
        if (natsMsgHeader_Keys(m, &keys, &n) == NATS_OK) {
            for (int i = 0; i < n; ++i) {
                const char* v = nullptr;
                if (natsMsgHeader_Get(m, keys[i], &v) == NATS_OK && v) sm.headers[keys[i]] = v;
            }
            std::free(keys);
        }
        sm.msg_id = sm.headers.count("Nats-Msg-Id") ? sm.headers["Nats-Msg-Id"] : "";
        natsMsg_Destroy(m);
        out.push_back(std::move(sm));
    }
    return out;
}

std::uint64_t stream_size(const std::string& url, const std::string& stream) {
    try {
        Js j(url);
        jsStreamInfo* si = nullptr;
        if (js_GetStreamInfo(&si, j.js, stream.c_str(), nullptr, nullptr) != NATS_OK) return 0;
        std::uint64_t n = si->State.Msgs;
        jsStreamInfo_Destroy(si);
        return n;
    } catch (const std::exception&) {
        return 0;
    }
}

std::vector<std::string> stream_names(const std::string& url) {
    Js j(url);
    jsStreamNamesList* names = nullptr;
    std::vector<std::string> out;
    if (js_StreamNames(&names, j.js, nullptr, nullptr) == NATS_OK) {
        for (int i = 0; i < names->Count; ++i) out.emplace_back(names->List[i]);
        jsStreamNamesList_Destroy(names);
    }
    return out;
}

void add_stream(const std::string& url, const std::string& name, const std::vector<std::string>& subjects,
                std::int64_t max_msgs) {
    Js j(url);
    changefeed::nats_stream::Config stream(name, subjects);
    if (max_msgs >= 0) {
        stream.config.MaxMsgs = max_msgs;
        stream.config.Discard = js_DiscardNew;
    }
    jsErrCode code = static_cast<jsErrCode>(0);
    natsStatus s = changefeed::nats_stream::add(j.js, stream, &code);
    if (s != NATS_OK) throw std::runtime_error("cannot add stream " + name + ": " + natsStatus_GetText(s));
}

}  // namespace cftest
