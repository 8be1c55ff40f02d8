// Whether one notifier keeps up with many collections: commit-to-wake latency
// of a listener on a few of them, and the notifier's ticks and the NOTIFY
// queue sampled once a second.
//
//   feed_wake CONNINFO LEAD SECONDS TABLE...
//
// LISTENs on the channels of the TABLEs (changefeed.collections.channel) for
// LEAD + SECONDS + 2 seconds, recording when each wake-up arrived; the writes
// are expected from LEAD to LEAD + SECONDS, and the samples are taken from
// two seconds into them to their end (ticks are only recorded while changes
// come in, the first changefeed.tick_interval = 1 s after the first).  A row's latency is the first
// wake-up on its table's channel at or after its commit timestamp (needs
// track_commit_timestamp = on; rows must carry their own xmin, i.e. be
// inserted, not updated).  Prints
//   "count p50_ms p95_ms p99_ms p99_first_half_ms p99_second_half_ms max_tick_age_s max_queue_usage"
// A notifier falling behind shows as a second half slower than the first and
// ticks older than changefeed.tick_interval.
#include "bench_db.hpp"

#include <pqxx/pqxx>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

class WakeLog : public pqxx::notification_receiver {
public:
    WakeLog(pqxx::connection_base& c, const std::string& channel) : pqxx::notification_receiver(c, channel) {}
    void operator()(const std::string&, int) override { at_us.push_back(bench::now_us()); }
    std::vector<std::int64_t> at_us;  // in arrival order, so sorted
};

double p99_of(std::vector<double> v) {
    std::istringstream in(bench::percentiles_ms(std::move(v)));
    double p50, p95, p99;
    return in >> p50 >> p95 >> p99 ? p99 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::cerr << "usage: feed_wake CONNINFO LEAD SECONDS TABLE...\n";
        return 2;
    }
    std::string conninfo = argv[1];
    const auto lead_us = std::int64_t(std::stod(argv[2]) * 1e6), writes_us = std::int64_t(std::stod(argv[3]) * 1e6);
    std::vector<std::string> tables(argv + 4, argv + argc);
    try {
        pqxx::connection listen(conninfo), probe(conninfo);
        std::vector<std::unique_ptr<WakeLog>> logs;
        for (auto& t : tables) {
            pqxx::nontransaction tx(probe);
            auto channel = tx.exec_params1("SELECT channel FROM changefeed.collections WHERE table_name = $1::regclass",
                                           t)[0]
                               .as<std::string>();
            logs.push_back(std::make_unique<WakeLog>(listen, channel));
        }
        const std::int64_t from_us = bench::now_us();
        const std::int64_t until_us = from_us + lead_us + writes_us + 2000000;
        const std::int64_t last_sample = from_us + lead_us + writes_us;
        std::int64_t next_sample = from_us + lead_us + 2000000;
        double max_tick_age = 0, max_queue = 0;
        while (bench::now_us() < until_us) {
            listen.await_notification(0, 50000);
            if (bench::now_us() < next_sample || next_sample > last_sample) continue;
            next_sample += 1000000;
            pqxx::nontransaction tx(probe);
            auto r = tx.exec1(
                "SELECT coalesce(extract(epoch FROM now() - (SELECT max(at) FROM changefeed.tick)), 0)::float8,"
                "       pg_notification_queue_usage()");
            max_tick_age = std::max(max_tick_age, r[0].as<double>());
            max_queue = std::max(max_queue, r[1].as<double>());
        }

        // Latency of each row committed while listening, to the next wake-up of its channel.
        std::vector<double> all, first, second;
        const std::int64_t middle = from_us + lead_us + writes_us / 2;
        for (size_t i = 0; i < tables.size(); ++i) {
            pqxx::nontransaction tx(probe);
            auto& wakes = logs[i]->at_us;
            for (auto row :
                 tx.exec("SELECT (extract(epoch FROM pg_xact_commit_timestamp(xmin)) * 1000000)::bigint FROM " +
                         tx.quote_name(tables[i]))) {
                if (row[0].is_null()) continue;
                auto commit = row[0].as<std::int64_t>();
                if (commit < from_us) continue;
                auto wake = std::lower_bound(wakes.begin(), wakes.end(), commit);
                if (wake == wakes.end()) continue;  // committed after the last wake-up heard
                double ms = double(*wake - commit) / 1000.0;
                all.push_back(ms);
                (commit < middle ? first : second).push_back(ms);
            }
        }
        std::printf("%zu %s %.3f %.3f %.3f %.6f\n", all.size(), bench::percentiles_ms(all).c_str(), p99_of(first),
                    p99_of(second), max_tick_age, max_queue);
    } catch (const std::exception& e) {
        std::cerr << "feed_wake: " << e.what() << "\n";
        return 1;
    }
}
