// Lag of a processor under a sustained write rate.
//
//   feed_scale CONNINFO TABLE NAME INSTANCES SECONDS READY_FILE
//
// Starts INSTANCES all-versions processors of NAME (no-op handler), waits
// until the ranges of TABLE are split evenly among them, then creates
// READY_FILE (the writer starts on it) and samples once a second for SECONDS: the changes not yet handled (ids the writers
// took from TABLE's id sequence minus changes handled) and the age of the
// oldest change handled in that second (handled - written_at, the writer's
// transaction start), i.e. how far behind the handlers ran.
// Prints "samples max_pending p99_pending max_age_s p99_age_s handled", and
// each sample on stderr ("second pending age_s").
#include "bench_db.hpp"

#include <changefeed/changefeed.hpp>
#include <pqxx/pqxx>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double p99(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, size_t(0.99 * double(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 7) {
        std::cerr << "usage: feed_scale CONNINFO TABLE NAME INSTANCES SECONDS READY_FILE\n";
        return 2;
    }
    std::string conninfo = argv[1], table = argv[2], name = argv[3], ready = argv[6];
    int instances = std::stoi(argv[4]);
    double seconds = std::stod(argv[5]);
    try {
        using namespace std::chrono_literals;
        std::atomic<long> handled{0};
        std::mutex mu;
        double oldest_s = 0;  // the oldest change handled since the last sample, seconds behind
        std::vector<std::unique_ptr<changefeed::Processor>> ps;
        for (int i = 0; i < instances; ++i) {
            changefeed::ProcessorOptions o;
            o.instance_name = "scale-" + std::to_string(i);
            o.acquire_interval = 500ms;
            o.lease_duration = 4s;
            o.renew_interval = 1s;
            o.poll_interval = 1s;
            ps.push_back(std::make_unique<changefeed::Processor>(changefeed::make_processor(
                changefeed::Collection(conninfo, table), name,
                [&](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
                    const auto now = std::chrono::system_clock::now();
                    double oldest = 0;
                    for (const auto& ch : batch)
                        if (ch.written_at)
                            oldest = std::max(oldest, std::chrono::duration<double>(now - *ch.written_at).count());
                    handled += long(batch.size());
                    std::lock_guard lock(mu);
                    oldest_s = std::max(oldest_s, oldest);
                },
                changefeed::AllVersionsOptions(o))));
            ps.back()->start();
        }
        pqxx::connection c(conninfo);
        auto t0 = clock_type::now();
        while (!bench::leases_even(c, table, name, instances)) {
            if (clock_type::now() - t0 > 2min)
                throw std::runtime_error("the ranges were not split evenly in 2 minutes");
            std::this_thread::sleep_for(50ms);
        }
        std::ofstream(ready) << "ready\n";

        std::vector<double> pending, age;
        const auto end = clock_type::now() + std::chrono::milliseconds(long(seconds * 1000));
        auto next = clock_type::now() + 1s;
        while (next <= end) {
            std::this_thread::sleep_until(next);
            next += 1s;
            pqxx::nontransaction tx(c);
            auto r = tx.exec_params1("SELECT coalesce(pg_sequence_last_value(pg_get_serial_sequence($1, 'id')), 0)",
                                     table);
            pending.push_back(std::max(0.0, double(r[0].as<long>() - handled.load())));
            {
                std::lock_guard lock(mu);
                age.push_back(oldest_s);
                oldest_s = 0;
            }
            std::cerr << pending.size() << "\t" << pending.back() << "\t" << age.back() << "\n";
        }
        for (auto& p : ps) p->stop();
        std::printf("%zu %.0f %.0f %.3f %.3f %ld\n", pending.size(),
                    pending.empty() ? 0.0 : *std::max_element(pending.begin(), pending.end()), p99(pending),
                    age.empty() ? 0.0 : *std::max_element(age.begin(), age.end()), p99(age), handled.load());
    } catch (const std::exception& e) {
        std::cerr << "feed_scale: " << e.what() << "\n";
        return 1;
    }
}
