// The shared reader and listener of subscriptions.  One reader serves every
// subscription of a connection string, so a hundred subscriptions cost two
// connections, not two hundred.  Subscriptions of one collection with the
// same filter at the same position (all hot ones, once caught up) share one
// read, filtered in the database: a wake-up reads once per collection and
// distinct filter, not once per subscription, and builds each change once.
// A notification is only a hint: each subscription also polls, so a lost one
// only delays.
#include "subscribe/subscription_hub.hpp"

#include "core/connection_string.hpp"
#include "core/db.hpp"
#include "supervise/consumer_policy.hpp"
#include "supervise/supervised_loop.hpp"

#include <boost/json/serialize.hpp>

namespace changefeed::detail {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int page_size = 1000;
constexpr auto backoff_min = std::chrono::milliseconds(100);
constexpr auto backoff_max = std::chrono::milliseconds(5000);

class Receiver final : public pqxx::notification_receiver {
public:
    Receiver(pqxx::connection& c, const std::string& channel, std::function<void(const std::string&)> wake)
        : pqxx::notification_receiver(c, channel), wake_(std::move(wake)) {}
    void operator()(const std::string&, int) override { wake_(channel()); }

private:
    std::function<void(const std::string&)> wake_;
};

// What decides a read's rows besides the position: subscriptions of one table
// with equal keys may share a read.  The tenant scope is the subscription's
// own; the role reading is the hub connection's, the same for all.
std::string filter_key(const ReadFilter& f) {
    std::string k;
    auto add = [&](const std::optional<std::string>& v) {
        k += v ? std::to_string(v->size()) + ":" + *v : std::string("-");
        k += ';';
    };
    add(f.jsonpath);
    add(f.vars);
    add(f.doc_id);
    add(f.tenant.tenant);
    add(f.tenant.tenant_column);
    k += f.tenant.strip_partition_prefix ? '1' : '0';
    k += f.schema_changes ? '1' : '0';
    k += f.moves ? '1' : '0';
    return k;
}

std::mutex registry_mu;
std::map<std::string, std::weak_ptr<Hub>> registry;

}  // namespace

std::shared_ptr<Hub> Hub::of(const std::string& conninfo) {
    std::lock_guard lock(registry_mu);
    if (auto h = registry[conninfo].lock()) return h;
    auto h = std::make_shared<Hub>(conninfo);
    registry[conninfo] = h;
    return h;
}

Hub::Hub(std::string conninfo) : conninfo_(std::move(conninfo)) {
    // Through a transaction pooler a LISTEN would stay on a server session
    // other clients are handed: subscriptions poll (poll_interval) there.
    const bool listens = !through_transaction_pooler(conninfo_);  // throws before any thread starts
    reader_ = std::thread([this] { reader_loop(); });
    if (listens) listener_ = std::thread([this] { listener_loop(); });
}

Hub::~Hub() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    reader_.join();
    if (listener_.joinable()) listener_.join();
}

template <class F>
auto Hub::with_connection(F&& f) -> decltype(f(std::declval<pqxx::connection&>())) {
    std::lock_guard lock(conn_mu_);
    try {
        if (!conn_) conn_ = connect(conninfo_);
        return f(*conn_);
    } catch (...) {
        Error e = to_error(std::current_exception());
        if (is_connection_error(e)) conn_.reset();
        throw e;
    }
}

void Hub::add(const std::shared_ptr<SubscriptionState>& s, const Collection& collection) {
    if (collection.table().empty()) throw Error(errc::collection_not_found, "the table name is empty");
    with_connection([&](pqxx::connection& c) {
        translated([&] {
            pqxx::work tx(c);
            auto r = tx.exec_params("SELECT x.id, changefeed.current_position(), c.id IS NOT NULL, c.tenant_column,"
                                    "       c.partition_key[1] = c.tenant_column AND cardinality(c.partition_key) > 1"
                                    "  FROM (SELECT (changefeed.collection_of($1::regclass)).id) x"
                                    "  LEFT JOIN changefeed.collections c ON c.id = x.id",
                                    collection.table());
            s->channel = "changefeed_" + r[0][0].as<std::string>();
            s->position = r[0][1].as<std::string>();
            if (!r[0][2].as<bool>())
                throw Error(errc::permission_denied,
                            "permission denied to read the change feed of " + collection.table() +
                                ": the role may not SELECT the table",
                            "42501");
            auto& scope = s->filter.tenant;
            if (scope.scoped()) {
                if (r[0][3].is_null())
                    throw Error(errc::invalid_option, "the tenant option needs a collection with a tenant column; " +
                                                          collection.table() + " has none");
                scope.tenant_column = r[0][3].as<std::string>();
                scope.strip_partition_prefix = r[0][4].as<bool>();
            }
            if (s->filter.jsonpath) {
                try {  // refuse a bad filter now rather than on the first read
                    tx.exec_params("SELECT $1::jsonpath, $2::jsonb", *s->filter.jsonpath, *s->filter.vars);
                } catch (const pqxx::sql_error& e) {
                    throw Error(errc::invalid_option, std::string("filter refused: ") + e.what(),
                                std::string(e.sqlstate()));
                }
            }
            tx.exec("SELECT changefeed.ensure_notifier()");
            tx.commit();
        });
        // A role that may not read the feed (as asked) is refused now, not on the first read.
        // Subscriptions read every version (CF021 on a collection that logs keys alone).
        probe_read(c, collection.table(), s->filter.tenant.tenant,
                   s->filter.schema_changes ? FeedMode::all_versions_and_schema : FeedMode::all_versions_and_deletes);
        return 0;
    });
    s->read_key = filter_key(s->filter);
    {
        std::lock_guard lock(mu_);
        subs_.push_back(s);
        ++channels_[s->channel];
        kicked_ = true;
    }
    cv_.notify_all();
}

void Hub::remove(const SubscriptionState* s) {
    {
        std::lock_guard lock(mu_);
        for (auto it = subs_.begin(); it != subs_.end(); ++it) {
            if (it->get() != s) continue;
            if (--channels_[s->channel] == 0) channels_.erase(s->channel);
            subs_.erase(it);
            break;
        }
    }
    cv_.notify_all();
}

void Hub::kick() {
    {
        std::lock_guard lock(mu_);
        kicked_ = true;
    }
    cv_.notify_all();
}

void Hub::wake_channel(const std::string& channel) {
    {
        std::lock_guard lock(mu_);
        for (auto& s : subs_)
            if (channel.empty() || s->channel == channel) s->wake = true;
        kicked_ = true;
    }
    cv_.notify_all();
}

Hub::ReadCounts Hub::read_counts() {
    std::lock_guard lock(mu_);
    return counts_;
}

std::vector<std::shared_ptr<SubscriptionState>> Hub::snapshot() {
    std::lock_guard lock(mu_);
    return subs_;
}

bool Hub::stopping_now() {
    std::lock_guard lock(mu_);
    return stopping_;
}

namespace {

// Subscriptions of one table at one position with one filter: one read
// serves them all.
struct SharedRead {
    std::vector<std::shared_ptr<SubscriptionState>> members;
    bool due = false;
};

// Hands one read's changes to every member, each change built once and
// shared; only clears and schema changes are told apart per member (a
// TRUNCATE logs one clear per range, a schema change one row per range: each
// subscription gets one).
std::int64_t schema_version_of(const Change& c) {
    const auto* o = c.current.if_object();
    const auto* v = o ? o->if_contains("version") : nullptr;
    return v && v->is_int64() ? v->as_int64() : 0;
}

void deliver(SharedRead& g, ReadResult& rr) {
    std::vector<std::shared_ptr<const Change>> out;
    out.reserve(rr.changes.size());
    bool clears = false;
    for (auto& c : rr.changes) {
        if (c.operation == Operation::clear || c.operation == Operation::schema) {
            c.doc_id.clear();  // of no one document
            clears = true;
        }
        out.push_back(std::make_shared<const Change>(std::move(c)));
    }
    for (auto& s : g.members) {
        s->position = rr.position;
        if (out.empty()) {
            s->delivered_up_to(rr.position);
            continue;
        }
        if (!clears) {
            s->push(out);
            s->delivered_up_to(rr.position);
            continue;
        }
        std::vector<std::shared_ptr<const Change>> mine;
        mine.reserve(out.size());
        for (const auto& c : out) {
            if (c->operation == Operation::clear) {
                if (c->txid == s->last_clear_txid) continue;
                s->last_clear_txid = c->txid;
            } else if (c->operation == Operation::schema) {
                const auto version = schema_version_of(*c);
                if (version <= s->last_schema_version) continue;
                s->last_schema_version = version;
            }
            mine.push_back(c);
        }
        s->push(mine);
        s->delivered_up_to(rr.position);
    }
}

}  // namespace

void Hub::reader_loop() {
    // A lost connection is told to the subscriptions it read for, not thrown:
    // the round ends and backs off.
    SupervisedLoop loop(backoff_min, backoff_max, [this](std::chrono::milliseconds d) { return pause(d); });
    loop.run([this] { return stopping_now(); }, [&] { return read_round(loop); },
             [](const Error&, std::exception_ptr) -> AfterFailure { throw; });
}

// One round of the shared reader: every due table read once; false when stopping.
bool Hub::read_round(SupervisedLoop& loop) {
    bool more = false;
    bool connection_lost = false;
    const auto now = Clock::now();
    auto next_due = now + std::chrono::seconds(1);
    // collection (its channel) -> (filter, position) -> its subscriptions.  A subscription
    // whose buffer is full is left out and keeps its position: once its
    // consumer drained it, it reads alone from there until it caught up
    // in the same snapshot as the others, then shares their reads again.
    std::map<std::string, std::map<std::pair<std::string, std::string>, SharedRead>> tables;
    for (auto& s : snapshot()) {
        if (s->finished()) continue;
        if (s->buffered() >= s->options.max_buffered) continue;  // the consumer kicks when it drains
        auto& g = tables[s->channel][{s->read_key, s->position}];
        g.members.push_back(s);
        if (s->wake.load() || now >= s->next_poll) g.due = true;
    }
    for (auto& [channel, groups] : tables) {
        if (stopping_now()) return false;
        // The table as one of them named it (the same relation for all:
        // one connection resolves every name).
        const std::string& table = groups.begin()->second.members.front()->table;
        // A table due for one group reads all of its groups in one
        // snapshot: those caught up come together at one position.
        bool due = false;
        for (auto& [key, g] : groups) due = due || g.due;
        if (!due) {
            for (auto& [key, g] : groups)
                for (auto& s : g.members) next_due = std::min(next_due, s->next_poll);
            continue;
        }
        std::vector<SharedRead*> served;
        std::vector<FilteredRead> reads;
        for (auto& [key, g] : groups) {
            for (auto& s : g.members) {
                s->wake = false;  // before the read: a notification from now on reads again
                s->next_poll = now + s->options.poll_interval;
                next_due = std::min(next_due, s->next_poll);
            }
            served.push_back(&g);
            reads.push_back({&key.second, &g.members.front()->filter});
        }
        auto read = [&](const std::vector<FilteredRead>& rs) {
            auto out = with_connection([&](pqxx::connection& c) {
                return read_filtered_together(c, table, rs, page_size);
            });
            std::lock_guard lock(mu_);
            counts_.reads += rs.size();
            ++counts_.rounds;
            return out;
        };
        auto lost = [&](const Error& e) {
            for (auto* g : served)
                for (auto& s : g->members) {
                    s->wake = true;  // read again once reconnected
                    s->report(e, std::make_exception_ptr(e));
                }
            connection_lost = true;
        };
        std::vector<std::optional<FilteredResult>> results(served.size());
        try {
            auto rs = read(reads);
            for (std::size_t i = 0; i < rs.size(); ++i) results[i] = std::move(rs[i]);
        } catch (const Error& e) {
            if (is_connection_error(e)) {
                lost(e);
                break;
            }
            // One read failed the snapshot's transaction: each alone
            // again, so that the error ends only the subscriptions it is
            // about (a position that lost its history, ...).
            for (std::size_t i = 0; i < served.size() && !connection_lost; ++i) {
                try {
                    results[i] = std::move(read({reads[i]}).front());
                } catch (const Error& e2) {
                    if (is_connection_error(e2)) {
                        lost(e2);
                        break;
                    }
                    for (auto& s : served[i]->members) s->end(e2);
                }
            }
            if (connection_lost) break;
        }
        loop.succeeded();
        for (std::size_t i = 0; i < served.size(); ++i) {
            if (!results[i]) continue;
            deliver(*served[i], results[i]->read);
            if (!results[i]->caught_up) {  // a full page: read on at once
                for (auto& s : served[i]->members) s->wake = true;
                more = true;
            }
        }
    }
    if (connection_lost) {
        loop.back_off();
        return true;
    }
    std::unique_lock lock(mu_);
    if (!more) cv_.wait_until(lock, next_due, [&] { return kicked_ || stopping_; });
    kicked_ = false;
    return true;
}

// Waits up to `delay` on the hub's condition variable; true when stopping.
bool Hub::pause(std::chrono::milliseconds delay) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, delay, [&] { return stopping_; });
}

void Hub::listener_loop() {
    SupervisedLoop loop(backoff_min, backoff_max, [this](std::chrono::milliseconds d) { return pause(d); });
    loop.run([this] { return stopping_now(); },
             [&] {
                 auto conn = connect(conninfo_);
                 std::map<std::string, std::unique_ptr<Receiver>> receivers;
                 bool first = true;
                 while (!stopping_now()) {
                     std::map<std::string, int> wanted;
                     {
                         std::lock_guard lock(mu_);
                         wanted = channels_;
                     }
                     std::vector<std::string> added;
                     for (auto it = receivers.begin(); it != receivers.end();)
                         it = wanted.count(it->first) ? std::next(it) : receivers.erase(it);  // UNLISTEN
                     for (const auto& [channel, n] : wanted) {
                         if (receivers.count(channel)) continue;
                         receivers[channel] = std::make_unique<Receiver>(*conn, channel, [this](const std::string& ch) {
                             wake_channel(ch);
                         });
                         added.push_back(channel);
                     }
                     if (!added.empty()) {
                         conn->get_notifs();                             // makes the LISTENs take effect now
                         for (const auto& ch : added) wake_channel(ch);  // what came before we listened
                     }
                     if (first) {
                         wake_channel("");  // after a reconnect: whatever was notified meanwhile
                         first = false;
                         loop.succeeded();
                     }
                     conn->await_notification(0, 200000);  // short, so that stopping is noticed
                     if (!conn->is_open()) throw Error(errc::connection_failed, "listen connection closed");
                 }
                 return true;
             },
             [](const Error&, std::exception_ptr) { return AfterFailure::back_off; });
}

}  // namespace changefeed::detail
