// The shared reader and listener of subscriptions.  One reader serves every
// subscription of a connection string in turn (each read filtered in the
// database by that subscription's filter), so a hundred subscriptions cost two
// connections, not two hundred.  A notification is only a hint: each
// subscription also polls, so a lost one only delays.
#include "subscription_hub.hpp"

#include "consumer_policy.hpp"

#include "db.hpp"

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
    reader_ = std::thread([this] { reader_loop(); });
    listener_ = std::thread([this] { listener_loop(); });
}

Hub::~Hub() {
    {
        std::lock_guard lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    reader_.join();
    listener_.join();
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
            auto r = tx.exec_params(
                "SELECT x.id, changefeed.current_position(), c.id IS NOT NULL, c.tenant_column,"
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
                    throw Error(errc::invalid_option, std::string("filter refused: ") + e.what(), std::string(e.sqlstate()));
                }
            }
            tx.exec("SELECT changefeed.ensure_notifier()");
            tx.commit();
        });
        // A role that may not read the feed (as asked) is refused now, not on the first read.
        // Subscriptions read every version (CF021 on a collection that logs keys alone).
        probe_read(c, collection.table(), s->filter.tenant.tenant, false);
        return 0;
    });
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

std::vector<std::shared_ptr<SubscriptionState>> Hub::snapshot() {
    std::lock_guard lock(mu_);
    return subs_;
}

bool Hub::stopping_now() {
    std::lock_guard lock(mu_);
    return stopping_;
}

void Hub::reader_loop() {
    Backoff backoff(backoff_min, backoff_max);
    while (!stopping_now()) {
        bool more = false;
        auto next_due = Clock::now() + std::chrono::seconds(1);
        bool connection_lost = false;
        for (auto& s : snapshot()) {
            if (stopping_now()) return;
            if (s->finished()) continue;
            auto now = Clock::now();
            if (s->buffered() >= s->options.max_buffered) continue;  // the consumer kicks when it drains
            if (!s->wake.exchange(false) && now < s->next_poll) {
                next_due = std::min(next_due, s->next_poll);
                continue;
            }
            s->next_poll = now + s->options.poll_interval;
            next_due = std::min(next_due, s->next_poll);
            ReadResult rr;
            try {
                rr = with_connection(
                    [&](pqxx::connection& c) { return read_filtered(c, s->table, s->position, page_size, s->filter); });
            } catch (const Error& e) {
                if (is_connection_error(e)) {
                    s->wake = true;  // read again once reconnected
                    s->report(e, std::make_exception_ptr(e));
                    connection_lost = true;
                    break;
                }
                s->end(e);
                continue;
            }
            backoff.reset();
            const bool full = static_cast<int>(rr.changes.size()) == page_size;
            std::vector<Change> out;
            out.reserve(rr.changes.size());
            for (auto& c : rr.changes) {
                if (c.operation == Operation::clear) {
                    if (c.txid == s->last_clear_txid) continue;
                    s->last_clear_txid = c.txid;
                    c.doc_id.clear();  // a clear is of no one document
                }
                out.push_back(std::move(c));
            }
            s->position = std::move(rr.position);
            if (!out.empty()) s->push(std::move(out));
            if (full) {
                s->wake = true;
                more = true;
            }
        }
        std::unique_lock lock(mu_);
        if (connection_lost) {
            cv_.wait_for(lock, backoff.next(), [&] { return stopping_; });
            continue;
        }
        if (!more) cv_.wait_until(lock, next_due, [&] { return kicked_ || stopping_; });
        kicked_ = false;
    }
}

void Hub::listener_loop() {
    Backoff backoff(backoff_min, backoff_max);
    while (!stopping_now()) {
        try {
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
                    receivers[channel] = std::make_unique<Receiver>(
                        *conn, channel, [this](const std::string& ch) { wake_channel(ch); });
                    added.push_back(channel);
                }
                if (!added.empty()) {
                    conn->get_notifs();  // makes the LISTENs take effect now
                    for (const auto& ch : added) wake_channel(ch);  // what came before we listened
                }
                if (first) {
                    wake_channel("");  // after a reconnect: whatever was notified meanwhile
                    first = false;
                    backoff.reset();
                }
                conn->await_notification(0, 200000);  // short, so that stopping is noticed
                if (!conn->is_open()) throw Error(errc::connection_failed, "listen connection closed");
            }
        } catch (...) {
            std::unique_lock lock(mu_);
            cv_.wait_for(lock, backoff.next(), [&] { return stopping_; });
        }
    }
}

}  // namespace changefeed::detail
