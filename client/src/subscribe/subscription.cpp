// Subscriptions: the consumer's side (queue, callback thread, cancel).
#include <changefeed/subscription.hpp>

#include <changefeed/history.hpp>

#include "core/db.hpp"
#include "subscribe/subscription_hub.hpp"
#include "supervise/consumer_policy.hpp"

#include <boost/json/serialize.hpp>

namespace changefeed {

namespace detail {

void SubscriptionState::push(const std::vector<std::shared_ptr<const Change>>& changes) {
    {
        std::lock_guard lock(mu);
        if (cancelled) return;
        queue.insert(queue.end(), changes.begin(), changes.end());
    }
    cv.notify_all();
}

void SubscriptionState::delivered_up_to(const std::string& position) {
    {
        std::lock_guard lock(mu);
        delivered = position;
    }
    cv.notify_all();
}

void SubscriptionState::report(const Error& e, std::exception_ptr p) {
    tell_error(options.on_error, std::nullopt, e, p);
}

void SubscriptionState::end(const Error& e) {
    {
        std::lock_guard lock(mu);
        if (ended || cancelled) return;
        ended = true;
        error = e.code();
    }
    report(e, std::make_exception_ptr(e));
    cv.notify_all();
}

void SubscriptionState::dispatch_loop() {
    auto token = stop.get_token();
    for (;;) {
        std::shared_ptr<const Change> c;
        {
            std::unique_lock lock(mu);
            cv.wait(lock, token, [&] { return !queue.empty() || ended; });
            if (token.stop_requested() || queue.empty()) return;
            const bool was_full = queue.size() >= options.max_buffered;
            c = std::move(queue.front());
            queue.pop_front();
            busy = true;
            if (was_full && !cancelled && hub) hub->kick();
        }
        try {
            Context ctx;
            ctx.range_id = c->range_id;
            ctx.range = std::to_string(c->range_id);
            ctx.stop = token;
            callback(*c, ctx);
        } catch (...) {
            report(handler_failure(std::current_exception(), "subscription callback failed"), std::current_exception());
        }
        {
            std::lock_guard lock(mu);
            busy = false;
        }
        cv.notify_all();
    }
}

}  // namespace detail

namespace {

std::shared_ptr<detail::SubscriptionState> make_state(const Collection& collection, SubscriptionOptions options,
                                                      ChangeCallback callback) {
    if (options.poll_interval <= std::chrono::milliseconds(0))
        throw Error(errc::invalid_option, "poll_interval must be positive");
    if (options.max_buffered < 1) throw Error(errc::invalid_option, "max_buffered must be at least 1");
    auto s = std::make_shared<detail::SubscriptionState>();
    s->conninfo = collection.conninfo();
    s->table = collection.table();
    if (options.filter) {
        auto f = compile(*options.filter);
        s->filter.jsonpath = f.jsonpath;
        s->filter.vars = boost::json::serialize(f.vars);
    }
    s->filter.doc_id = options.document_id;
    s->filter.schema_changes = options.schema_changes;
    s->filter.moves = options.filter_moves;
    s->filter.tenant.tenant = options.tenant;  // the rest of the scope is set by Hub::add
    s->options = std::move(options);
    s->callback = std::move(callback);
    s->hub = detail::Hub::of(collection.conninfo());
    s->hub->add(s, collection);  // throws before anything runs
    // The dispatcher shares the state: a callback that cancels its own
    // subscription must find it alive until it returns.
    if (s->callback) s->dispatcher = std::thread([s] { s->dispatch_loop(); });
    return s;
}

}  // namespace

Subscription subscribe(const Collection& collection, SubscriptionOptions options) {
    return Subscription(make_state(collection, std::move(options), {}));
}

Subscription subscribe(const Collection& collection, ChangeCallback callback, SubscriptionOptions options) {
    if (!callback) throw Error(errc::invalid_option, "the callback must not be empty");
    return Subscription(make_state(collection, std::move(options), std::move(callback)));
}

Subscription watch(const Collection& collection, std::string id, SubscriptionOptions options) {
    options.document_id = std::move(id);
    return subscribe(collection, std::move(options));
}

Subscription watch(const Collection& collection, std::string id, ChangeCallback callback, SubscriptionOptions options) {
    options.document_id = std::move(id);
    return subscribe(collection, std::move(callback), std::move(options));
}

Subscription::~Subscription() { cancel(); }
Subscription::Subscription(Subscription&&) noexcept = default;
Subscription& Subscription::operator=(Subscription&& o) noexcept {
    Subscription taken(std::move(o));
    std::swap(state_, taken.state_);  // the one this held is cancelled with `taken`
    return *this;
}

void Subscription::cancel() {
    if (!state_) return;
    auto s = std::move(state_);
    {
        std::lock_guard lock(s->mu);
        s->cancelled = true;
        s->queue.clear();
    }
    s->stop.request_stop();
    s->cv.notify_all();
    if (s->hub) s->hub->remove(s.get());
    if (s->dispatcher.joinable()) {
        // Cancelled from its own callback: the dispatcher cannot join itself;
        // it returns on its own, and its share of the state frees it last.
        if (s->dispatcher.get_id() == std::this_thread::get_id()) s->dispatcher.detach();
        else s->dispatcher.join();
    }
    // Last: releasing the hub may stop its threads.
    s->hub.reset();
}

bool Subscription::active() const {
    if (!state_) return false;
    std::lock_guard lock(state_->mu);
    return !state_->cancelled && !state_->ended;
}

std::error_code Subscription::error() const {
    if (!state_) return {};
    std::lock_guard lock(state_->mu);
    return state_->error;
}

void Subscription::wait_for(const std::string& position, std::chrono::milliseconds timeout) const {
    if (!state_) throw Error(errc::invalid_option, "wait_for() on a subscription that was moved from");
    if (timeout.count() < 0 || timeout > std::chrono::hours(1))
        throw Error(errc::invalid_option, "the timeout of wait_for must be between 0 and 1 hour");
    auto& s = *state_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto conn = detail::connect(s.conninfo);
    for (;;) {
        std::string at;
        {
            std::lock_guard lock(s.mu);
            if (s.cancelled) throw Error(errc::invalid_option, "wait_for() on a cancelled subscription");
            if (s.ended)
                throw Error(s.error.category() == changefeed_category() ? static_cast<errc>(s.error.value())
                                                                        : errc::database_error,
                            "the subscription ended before it delivered the position: " + s.error.message());
            // Read up to `at`, and everything read handed over and handled.
            if (s.queue.empty() && !s.busy) at = s.delivered;
        }
        if (!at.empty() && detail::translated([&] {
                pqxx::nontransaction tx(*conn);
                return tx.exec_params("SELECT changefeed.position_covers($1, $2)", at, position)[0][0].as<bool>();
            }))
            return;
        if (std::chrono::steady_clock::now() >= deadline)
            throw Error(errc::wait_timed_out, "the subscription of " + s.table +
                                                  " has not delivered every change before " + position +
                                                  " in time. Hint: a callback that takes long, or a full buffer, "
                                                  "holds it back");
        // Read now rather than at the next poll or notification.
        s.wake = true;
        if (s.hub) s.hub->kick();
        std::unique_lock lock(s.mu);
        s.cv.wait_for(lock, std::chrono::milliseconds(10));
    }
}

void Subscription::wait_until_caught_up(std::chrono::milliseconds timeout) const {
    if (!state_) throw Error(errc::invalid_option, "wait_until_caught_up() on a subscription that was moved from");
    wait_for(current_position(Collection(state_->conninfo, state_->table)), timeout);
}

std::optional<Change> Subscription::next(std::stop_token stop) {
    if (!state_) return std::nullopt;
    auto& s = *state_;
    if (s.callback) throw Error(errc::invalid_option, "next() on a callback subscription");
    std::unique_lock lock(s.mu);
    s.cv.wait(lock, stop, [&] { return !s.queue.empty() || s.ended || s.cancelled; });
    if (s.queue.empty() || stop.stop_requested()) return std::nullopt;
    const bool was_full = s.queue.size() >= s.options.max_buffered;
    Change c = *s.queue.front();
    s.queue.pop_front();
    if (was_full && s.hub) s.hub->kick();
    return c;
}

std::optional<Change> Subscription::try_next() {
    if (!state_) return std::nullopt;
    auto& s = *state_;
    if (s.callback) throw Error(errc::invalid_option, "try_next() on a callback subscription");
    std::lock_guard lock(s.mu);
    if (s.queue.empty()) return std::nullopt;
    const bool was_full = s.queue.size() >= s.options.max_buffered;
    Change c = *s.queue.front();
    s.queue.pop_front();
    if (was_full && s.hub) s.hub->kick();
    return c;
}

}  // namespace changefeed
