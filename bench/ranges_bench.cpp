// Many ranges, many instances: how a processor's cost grows with its ranges.
//
//   ranges_bench burst CONNINFO TABLE INSTANCES CHANGES
//       INSTANCES all-versions processors started together; once the ranges
//       are split evenly, one INSERT of CHANGES rows; prints the seconds until
//       every change was handled.
//   ranges_bench split CONNINFO TABLE INSTANCES
//       INSTANCES processors started together, then one more; prints the
//       milliseconds to an even split after each.
//   ranges_bench idle CONNINFO TABLE SECONDS
//       one processor owning every range, idle; prints the CPU milliseconds
//       this process (getrusage) and its server sessions (/proc) used in
//       SECONDS.
// Acquire interval 500 ms, lease 4 s, renewal every second; poll 1 s.
#include "bench_db.hpp"

#include <changefeed/changefeed.hpp>
#include <pqxx/pqxx>

#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

changefeed::ProcessorOptions options(const std::string& instance) {
    using namespace std::chrono_literals;
    changefeed::ProcessorOptions o;
    o.instance_name = instance;
    o.acquire_interval = 500ms;
    o.lease_duration = 4s;
    o.renew_interval = 1s;
    o.poll_interval = 1s;
    return o;
}

struct Fleet {
    std::string conninfo, table, name;
    std::atomic<long> handled{0};
    std::vector<std::unique_ptr<changefeed::Processor>> ps;

    void add(int n) {
        std::vector<std::unique_ptr<changefeed::Processor>> fresh;
        for (int i = 0; i < n; ++i)
            fresh.push_back(std::make_unique<changefeed::Processor>(changefeed::make_processor(
                changefeed::Collection(conninfo, table), name,
                [this](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
                    handled += long(batch.size());
                },
                changefeed::AllVersionsOptions(options("i" + std::to_string(ps.size() + i))))));
        // Started together: each start() on its own thread.
        std::vector<std::thread> starts;
        for (auto& p : fresh) starts.emplace_back([&p] { p->start(); });
        for (auto& t : starts) t.join();
        for (auto& p : fresh) ps.push_back(std::move(p));
    }

    long wait_even(pqxx::connection& c, clock_type::time_point t0) {
        while (!bench::leases_even(c, table, name, int(ps.size()))) {
            if (clock_type::now() - t0 > std::chrono::minutes(2)) return -1;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        return long(std::chrono::duration_cast<std::chrono::milliseconds>(clock_type::now() - t0).count());
    }
};

double cpu_ms_self() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

// CPU milliseconds of the server sessions whose application_name is `app`.
double cpu_ms_sessions(pqxx::connection& c, const std::string& app) {
    pqxx::nontransaction tx(c);
    double ms = 0;
    const double tick = double(sysconf(_SC_CLK_TCK));
    for (const auto& row : tx.exec_params("SELECT pid FROM pg_stat_activity WHERE application_name = $1", app)) {
        std::ifstream f("/proc/" + row[0].as<std::string>() + "/stat");
        std::string line;
        if (!std::getline(f, line)) continue;
        std::istringstream rest(line.substr(line.rfind(')') + 2));
        std::string field;
        unsigned long long utime = 0, stime = 0;
        for (int i = 3; i <= 15 && rest >> field; ++i) {
            if (i == 14) utime = std::stoull(field);
            if (i == 15) stime = std::stoull(field);
        }
        ms += (utime + stime) * 1e3 / tick;
    }
    return ms;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 5) {
        std::cerr << "usage: ranges_bench burst|split|idle CONNINFO TABLE ...\n";
        return 2;
    }
    const std::string mode = argv[1];
    try {
        if (mode == "burst" && argc >= 6) {
            Fleet f;
            f.conninfo = argv[2];
            f.table = argv[3];
            f.name = "burst";
            const int instances = std::stoi(argv[4]);
            const long changes = std::stol(argv[5]);
            pqxx::connection c(f.conninfo);
            f.add(instances);
            if (f.wait_even(c, clock_type::now()) < 0) throw std::runtime_error("never balanced");
            std::this_thread::sleep_for(std::chrono::seconds(1));
            const auto t0 = clock_type::now();
            {
                pqxx::work tx(c);
                tx.exec("INSERT INTO " + c.quote_name(f.table) + " (id, v) SELECT g, 'x' FROM generate_series(1, " +
                        std::to_string(changes) + ") g");
                tx.commit();
            }
            while (f.handled < changes && clock_type::now() - t0 < std::chrono::minutes(5))
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
            if (f.handled < changes) throw std::runtime_error("not all changes handled");
            std::cout << secs << "\n";
            for (auto& p : f.ps) p->stop();
            return 0;
        }
        if (mode == "split") {
            Fleet f;
            f.conninfo = argv[2];
            f.table = argv[3];
            f.name = "split";
            const int instances = std::stoi(argv[4]);
            pqxx::connection c(f.conninfo);
            auto t0 = clock_type::now();
            f.add(instances);
            const long start_ms = f.wait_even(c, t0);
            std::this_thread::sleep_for(std::chrono::seconds(1));
            t0 = clock_type::now();
            f.add(1);
            const long join_ms = f.wait_even(c, t0);
            std::cout << start_ms << " " << join_ms << "\n";
            for (auto& p : f.ps) p->stop();
            return start_ms < 0 || join_ms < 0 ? 1 : 0;
        }
        if (mode == "idle") {
            const std::string app = "ranges_idle_" + std::to_string(getpid());
            Fleet f;
            f.conninfo = std::string(argv[2]) + " application_name=" + app;
            f.table = argv[3];
            f.name = "idle";
            const int seconds = std::stoi(argv[4]);
            pqxx::connection c(argv[2]);
            f.add(1);
            if (f.wait_even(c, clock_type::now()) < 0) throw std::runtime_error("never owned every range");
            std::this_thread::sleep_for(std::chrono::seconds(3));  // settle: first reads, checkpoints
            const double self0 = cpu_ms_self(), server0 = cpu_ms_sessions(c, app);
            std::this_thread::sleep_for(std::chrono::seconds(seconds));
            const double self1 = cpu_ms_self(), server1 = cpu_ms_sessions(c, app);
            std::cout << (self1 - self0) << " " << (server1 - server0) << "\n";
            for (auto& p : f.ps) p->stop();
            return 0;
        }
    } catch (const std::exception& e) {
        std::cerr << "ranges_bench: " << e.what() << "\n";
        return 1;
    }
    std::cerr << "usage: ranges_bench burst|split|idle CONNINFO TABLE ...\n";
    return 2;
}
