// Internal: what subscriptions of one connection string share -- one
// connection LISTENing on the channels of their collections and one reading
// the log, once per filter and position for all subscriptions that share
// them -- and the state of one subscription.
#pragma once

#include <changefeed/collection.hpp>
#include <changefeed/subscription_options.hpp>

#include "read/feed_reader.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <thread>
#include <vector>

namespace changefeed::detail {

class Hub;
class SupervisedLoop;

struct SubscriptionState {
    using Clock = std::chrono::steady_clock;

    // Fixed at subscribe().
    std::string conninfo;
    std::string table;
    std::string channel;
    ReadFilter filter;
    std::string read_key;  // the filter as text: equal keys may share a read
    SubscriptionOptions options;
    ChangeCallback callback;  // empty in pull mode
    // Kept alive by the subscription, released by cancel() in the caller's
    // thread (never in one of the hub's own threads, which it joins).
    std::shared_ptr<Hub> hub;

    // The reader thread's: where to read from, when to poll.
    std::string position;
    Clock::time_point next_poll{};
    std::uint64_t last_clear_txid = 0;     // a TRUNCATE logs one clear per range: deliver one
    std::int64_t last_schema_version = 0;  // so does a schema change
    std::atomic<bool> wake{true};

    // The consumer's side.
    std::mutex mu;
    std::condition_variable_any cv;
    std::deque<std::shared_ptr<const Change>> queue;  // shared by the subscriptions of one read
    bool cancelled = false;
    bool ended = false;
    // The position read up to, once what it read is in the queue; and
    // whether a callback runs: what wait_for() looks at.
    std::string delivered;
    bool busy = false;
    std::error_code error;
    std::stop_source stop;
    std::thread dispatcher;  // callback mode

    bool finished() {
        std::lock_guard lock(mu);
        return cancelled || ended;
    }
    std::size_t buffered() {
        std::lock_guard lock(mu);
        return queue.size();
    }
    // Adds a read's changes at once, so a transaction's changes arrive together.
    void push(const std::vector<std::shared_ptr<const Change>>& changes);
    // The read up to `position` is in the queue (or had nothing for it).
    void delivered_up_to(const std::string& position);
    // Ends the subscription because of `e`: tells on_error, wakes the consumer.
    void end(const Error& e);
    void report(const Error& e, std::exception_ptr p);
    void dispatch_loop();
};

class Hub {
public:
    // The hub of `conninfo`, shared while any subscription uses it.
    static std::shared_ptr<Hub> of(const std::string& conninfo);
    explicit Hub(std::string conninfo);
    ~Hub();

    // Describes the collection, checks the filter and takes the start
    // position (hot: what commits after this returns), then starts reading.
    void add(const std::shared_ptr<SubscriptionState>& s, const Collection& collection);
    void remove(const SubscriptionState* s);
    // Wakes the reader (a consumer drained its buffer, a notification came).
    void kick();
    // Reads of the log so far, and the rounds they came in (a round reads
    // every group of a collection in one snapshot): what sharing saves shows here.
    struct ReadCounts {
        std::uint64_t reads = 0;
        std::uint64_t rounds = 0;
    };
    ReadCounts read_counts();

private:
    template <class F>
    auto with_connection(F&& f) -> decltype(f(std::declval<pqxx::connection&>()));
    void reader_loop();
    bool read_round(SupervisedLoop& loop);
    void listener_loop();
    bool pause(std::chrono::milliseconds delay);
    void wake_channel(const std::string& channel);
    std::vector<std::shared_ptr<SubscriptionState>> snapshot();
    bool stopping_now();

    std::string conninfo_;
    std::mutex conn_mu_;  // guards conn_ (the reader's, also used by add())
    std::unique_ptr<pqxx::connection> conn_;

    std::mutex mu_;  // guards what follows
    std::condition_variable cv_;
    std::vector<std::shared_ptr<SubscriptionState>> subs_;
    std::map<std::string, int> channels_;  // channel -> subscriptions on it
    ReadCounts counts_;
    bool kicked_ = false;
    bool stopping_ = false;

    std::thread reader_, listener_;
};

}  // namespace changefeed::detail
