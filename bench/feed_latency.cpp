// Commit-to-handler latency of one consumer, measured against the commit
// timestamps of the rows it received.
//
//   feed_latency changefeed CONNINFO TABLE SECONDS   a changefeed processor (all versions)
//   feed_latency pgq CONNINFO QUEUE TABLE SECONDS    a PgQ consumer polling next_batch
//   feed_latency wal2json CONNINFO TABLE SECONDS     wal2json format-version 2 lines on stdin
//   feed_latency notify CONNINFO TABLE SECONDS       the floor: LISTEN on a bare connection to channel
//                                                    TABLE, whose writers NOTIFY the row's id as payload
//
// Prints "count p50_ms p95_ms p99_ms".  Rows carry their id in column/field "id".
#include "bench_db.hpp"

#include <changefeed/changefeed.hpp>
#include <boost/json.hpp>
#include <pqxx/pqxx>

#include <chrono>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Seen {
    std::mutex mu;
    std::vector<std::int64_t> ids, at_us;
    void add(std::int64_t id) {
        auto t = bench::now_us();
        std::lock_guard lock(mu);
        ids.push_back(id);
        at_us.push_back(t);
    }
};

// `long_poll`: reads wait in the server for the next commit (the default);
// false: the worker waits for the notifier's NOTIFY between reads.
void run_changefeed(const std::string& conninfo, const std::string& table, double seconds, Seen& seen,
                    bool long_poll = true) {
    changefeed::ProcessorOptions opt;
    opt.poll_interval = std::chrono::seconds(5);
    opt.long_poll = long_poll;
    opt.max_batch_size = 1000;
    auto p = changefeed::make_processor(
        changefeed::Collection(conninfo, table), "latency",
        [&](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
            for (auto& c : batch)
                if (c.has_current()) seen.add(c.current.at("id").to_number<std::int64_t>());
        },
        changefeed::AllVersionsOptions(opt));
    p.start();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    p.stop();
}

void run_pgq(const std::string& conninfo, const std::string& queue, double seconds, Seen& seen) {
    pqxx::connection c(conninfo);
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
        pqxx::work w(c);
        auto b = w.exec_params1("SELECT pgq.next_batch($1, 'latency')", queue);
        if (b[0].is_null()) {
            w.commit();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));  // PgQ consumers poll
            continue;
        }
        auto batch = b[0].as<std::int64_t>();
        for (auto row : w.exec_params("SELECT ev_data FROM pgq.get_batch_events($1)", batch)) {
            auto doc = boost::json::parse(row[0].c_str());
            seen.add(doc.at("id").to_number<std::int64_t>());
        }
        w.exec_params("SELECT pgq.finish_batch($1)", batch);
        w.commit();
    }
}

void run_wal2json(double seconds, Seen& seen) {
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    std::string line;
    while (std::chrono::steady_clock::now() < end && std::getline(std::cin, line)) {
        if (line.find("\"action\":\"I\"") == std::string::npos) continue;
        auto doc = boost::json::parse(line);
        for (auto& col : doc.at("columns").as_array())
            if (col.at("name") == "id") seen.add(col.at("value").to_number<std::int64_t>());
    }
}

// The floor any LISTEN-based consumer stands on: the writer's own NOTIFY
// (payload = the row's id) received on a plain connection, nothing read.
class IdReceiver : public pqxx::notification_receiver {
public:
    IdReceiver(pqxx::connection_base& c, const std::string& channel, Seen& seen)
        : pqxx::notification_receiver(c, channel), seen_(seen) {}
    void operator()(const std::string& payload, int) override { seen_.add(std::stoll(payload)); }

private:
    Seen& seen_;
};

void run_notify(const std::string& conninfo, const std::string& channel, double seconds, Seen& seen) {
    pqxx::connection c(conninfo);
    IdReceiver receiver(c, channel, seen);
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) c.await_notification(0, 100000);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::cerr << "usage: feed_latency changefeed|changefeed-listen|pgq|wal2json|notify CONNINFO ...\n";
        return 2;
    }
    std::string mode = argv[1], conninfo = argv[2];
    Seen seen;
    std::string table;
    try {
        if (mode == "changefeed" || mode == "changefeed-listen") {
            table = argv[3];
            run_changefeed(conninfo, table, std::stod(argv[4]), seen, mode == "changefeed");
        } else if (mode == "pgq" && argc >= 6) {
            table = argv[4];
            run_pgq(conninfo, argv[3], std::stod(argv[5]), seen);
        } else if (mode == "notify") {
            table = argv[3];
            run_notify(conninfo, table, std::stod(argv[4]), seen);
        } else if (mode == "wal2json") {
            table = argv[3];
            run_wal2json(std::stod(argv[4]), seen);
        } else {
            std::cerr << "unknown mode " << mode << "\n";
            return 2;
        }
        auto commits = bench::commit_times_us(conninfo, table, seen.ids);
        std::vector<double> ms;
        for (size_t i = 0; i < commits.size(); ++i)
            if (commits[i] > 0) ms.push_back(double(seen.at_us[i] - commits[i]) / 1000.0);
        std::cout << ms.size() << " " << bench::percentiles_ms(ms) << "\n";
    } catch (const std::exception& e) {
        std::cerr << "feed_latency: " << e.what() << "\n";
        return 1;
    }
}
