// Consumer throughput: drains a backlog and prints changes per second.
//
//   feed_drain changefeed CONNINFO TABLE NAME INSTANCES EXPECTED [default] [read=CONNINFO]
//                                     processors under one name; `default`: the default
//                                     batch and read sizes instead of batches of 1000;
//                                     `read=`: read the feed from that standby (read_connection)
//   feed_drain pgq CONNINFO QUEUE CONSUMER EXPECTED                 PgQ batches until EXPECTED events
//
// The changefeed processors' leases must have been created (lease_init) before
// the backlog was written, so that they start before it.
#include <changefeed/changefeed.hpp>
#include <pqxx/pqxx>

#include <atomic>
#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
    using clock = std::chrono::steady_clock;
    if (argc < 6) {
        std::cerr << "usage: feed_drain changefeed|pgq CONNINFO ...\n";
        return 2;
    }
    std::string mode = argv[1], conninfo = argv[2];
    try {
        if (mode == "changefeed" && argc >= 7) {
            std::string table = argv[3], name = argv[4];
            int instances = std::stoi(argv[5]);
            long expected = std::stol(argv[6]);
            bool defaults = false;
            std::string read_connection;
            for (int i = 7; i < argc; ++i) {
                const std::string arg = argv[i];
                if (arg == "default") defaults = true;
                else if (arg.rfind("read=", 0) == 0) read_connection = arg.substr(5);
            }
            std::atomic<long> handled{0};
            std::vector<std::unique_ptr<changefeed::Processor>> ps;
            auto t0 = clock::now();
            for (int i = 0; i < instances; ++i) {
                changefeed::ProcessorOptions opt;
                opt.instance_name = "drain-" + std::to_string(i);
                if (!defaults) opt.max_batch_size = 1000;
                opt.read_connection = read_connection;
                opt.acquire_interval = std::chrono::milliseconds(200);
                opt.poll_interval = std::chrono::milliseconds(200);
                ps.push_back(std::make_unique<changefeed::Processor>(changefeed::make_processor(
                    changefeed::Collection(conninfo, table), name,
                    [&](const std::vector<changefeed::Change>& batch, const changefeed::Context&) {
                        handled += long(batch.size());
                    },
                    changefeed::AllVersionsOptions(opt))));
                ps.back()->start();
            }
            auto deadline = t0 + std::chrono::minutes(10);
            while (handled < expected && clock::now() < deadline)
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            double secs = std::chrono::duration<double>(clock::now() - t0).count();
            for (auto& p : ps) p->stop();
            std::cout << handled.load() << " " << secs << " " << double(handled) / secs << "\n";
            return handled >= expected ? 0 : 1;
        }
        if (mode == "pgq") {
            std::string queue = argv[3], consumer = argv[4];
            long expected = std::stol(argv[5]), events = 0;
            pqxx::connection c(conninfo);
            auto t0 = clock::now();
            while (events < expected) {
                pqxx::work w(c);
                auto b = w.exec_params1("SELECT pgq.next_batch($1, $2)", queue, consumer);
                if (b[0].is_null()) {
                    w.exec("SELECT pgq.ticker()");
                    w.commit();
                    continue;
                }
                auto batch = b[0].as<std::int64_t>();
                for (auto row : w.exec_params("SELECT ev_id, ev_data FROM pgq.get_batch_events($1)", batch))
                    events += row[1].is_null() ? 0 : 1;
                w.exec_params("SELECT pgq.finish_batch($1)", batch);
                w.commit();
            }
            double secs = std::chrono::duration<double>(clock::now() - t0).count();
            std::cout << events << " " << secs << " " << double(events) / secs << "\n";
            return 0;
        }
        std::cerr << "unknown mode " << mode << "\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "feed_drain: " << e.what() << "\n";
        return 1;
    }
}
