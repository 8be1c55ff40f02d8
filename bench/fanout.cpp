// Fan-out: the time until every hot subscription of a process saw one write,
// for a few subscriptions and for many, side by side in one process.
//
//   fanout CONNINFO SMALL_TABLE SMALL LARGE_TABLE LARGE ROUNDS [SMALL_READER LARGE_READER]
//
// Two sets of subscriptions with the default options, SMALL on SMALL_TABLE
// and LARGE on LARGE_TABLE (tables of (id int PRIMARY KEY, kind text)), half
// of each filtered (kind == 'hot', which the writes match).  Each round
// inserts one row into each table in turn, in its own transaction, and times
// from just before the INSERT until the last subscription of that set saw
// it, 50 ms apart.  Two warm-up rounds first.  Prints one line per timed round:
// "small MS" and "large MS".
//
// SMALL_READER and LARGE_READER, when given, are the connection strings the
// two sets subscribe with (e.g. two roles under row-level security, one
// restricted by a policy, one not); the writer always uses CONNINFO.
#include <changefeed/changefeed.hpp>
#include <pqxx/pqxx>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// One set of subscriptions and the round it waits for.
struct Set {
    std::string table;
    int size = 0;
    std::mutex mu;
    std::condition_variable cv;
    int target = -1;  // the id of the round's row
    int seen = 0;     // subscriptions that saw it
    Clock::time_point last;
    std::vector<changefeed::Subscription> subs;

    void saw(int id) {
        std::lock_guard lock(mu);
        if (id != target) return;
        if (++seen == size) {
            last = Clock::now();
            cv.notify_all();
        }
    }
};

void subscribe_all(const std::string& conninfo, Set& set) {
    changefeed::Collection coll(conninfo, set.table);
    for (int i = 0; i < set.size; ++i) {
        changefeed::SubscriptionOptions o;
        if (i % 2) o.filter = changefeed::field("kind") == "hot";
        set.subs.push_back(changefeed::subscribe(
            coll,
            [&set](const changefeed::Change& c, const changefeed::Context&) {
                if (c.has_current()) set.saw(c.current.at("id").to_number<int>());
            },
            std::move(o)));
    }
}

// Milliseconds from just before the INSERT until the whole set saw it.
double round_ms(pqxx::connection& writer, Set& set, int id) {
    {
        std::lock_guard lock(set.mu);
        set.target = id;
        set.seen = 0;
    }
    const auto t0 = Clock::now();
    {
        pqxx::work tx(writer);
        tx.exec_params("INSERT INTO " + tx.quote_name(set.table) + " VALUES ($1, 'hot')", id);
        tx.commit();
    }
    std::unique_lock lock(set.mu);
    if (!set.cv.wait_for(lock, std::chrono::seconds(60), [&] { return set.seen == set.size; })) {
        std::cerr << "fanout: " << set.table << " saw row " << id << " in " << set.seen << " of " << set.size
                  << " subscriptions within 60 s\n";
        std::exit(1);
    }
    return std::chrono::duration<double, std::milli>(set.last - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 7 && argc != 9) {
        std::cerr << "usage: fanout CONNINFO SMALL_TABLE SMALL LARGE_TABLE LARGE ROUNDS [SMALL_READER LARGE_READER]\n";
        return 2;
    }
    const std::string conninfo = argv[1];
    Set small, large;
    small.table = argv[2];
    small.size = std::stoi(argv[3]);
    large.table = argv[4];
    large.size = std::stoi(argv[5]);
    const int rounds = std::stoi(argv[6]);
    subscribe_all(argc == 9 ? argv[7] : conninfo, small);
    subscribe_all(argc == 9 ? argv[8] : conninfo, large);
    pqxx::connection writer(conninfo);
    for (int r = 0; r < rounds + 2; ++r) {
        const double s = round_ms(writer, small, r + 1);
        const double l = round_ms(writer, large, r + 1);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // one write at a time, not a stream
        if (r < 2) continue;                                         // warm-up
        std::printf("small %.3f\nlarge %.3f\n", s, l);
        std::fflush(stdout);
    }
    return 0;
}
