// A writer on its own thread: one upsert per transaction on a table
// (id int primary key, ver int), each raising a document's version by one.
// It reconnects after errors (a failover), so it is given a multi-host
// connection string, and keeps what the server acknowledged.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>

namespace cftest {

class WriteLoad {
public:
    // Writes to `table` (created by the caller) through `conninfo`, on `docs`
    // documents, at most `max_writes` transactions, a pause of `gap` after each.
    WriteLoad(std::string conninfo, std::string table, int docs, int max_writes,
              std::chrono::microseconds gap = std::chrono::microseconds(1000))
        : conninfo_(std::move(conninfo)), table_(std::move(table)), docs_(docs), max_(max_writes), gap_(gap) {
        thread_ = std::thread([this] { run(); });
    }
    ~WriteLoad() { stop(); }
    WriteLoad(const WriteLoad&) = delete;
    WriteLoad& operator=(const WriteLoad&) = delete;

    void stop() {
        stopping_ = true;
        if (thread_.joinable()) thread_.join();
    }
    bool done() const { return finished_; }
    // Transactions the server acknowledged; and failed ones (in doubt or refused).
    int acknowledged() const { return acked_; }
    int failed() const { return failed_; }
    // Per document, the highest version acknowledged.
    std::map<int, int> acknowledged_versions() const {
        std::lock_guard lock(mu_);
        return versions_;
    }

private:
    void run() {
        std::minstd_rand random(42);
        std::unique_ptr<pqxx::connection> conn;
        for (int written = 0; written < max_ && !stopping_;) {
            try {
                if (!conn) conn = std::make_unique<pqxx::connection>(conninfo_);
                const int id = static_cast<int>(random() % static_cast<unsigned>(docs_));
                pqxx::work tx(*conn);
                auto r = tx.exec_params("INSERT INTO " + table_ +
                                            " AS t (id, ver) VALUES ($1, 1)"
                                            " ON CONFLICT (id) DO UPDATE SET ver = t.ver + 1 RETURNING ver",
                                        id);
                const int ver = r[0][0].as<int>();
                tx.commit();
                ++written;
                ++acked_;
                {
                    std::lock_guard lock(mu_);
                    int& v = versions_[id];
                    v = std::max(v, ver);
                }
                std::this_thread::sleep_for(gap_);
            } catch (const std::exception&) {
                ++failed_;
                conn.reset();
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        }
        finished_ = true;
    }

    const std::string conninfo_;
    const std::string table_;
    const int docs_;
    const int max_;
    const std::chrono::microseconds gap_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> finished_{false};
    std::atomic<int> acked_{0};
    std::atomic<int> failed_{0};
    mutable std::mutex mu_;
    std::map<int, int> versions_;
    std::thread thread_;
};

}  // namespace cftest
