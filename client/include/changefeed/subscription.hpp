// Subscriptions: hot, unleased, uncheckpointed change streams for reacting
// in-process -- the light sibling of a Processor.
//
//   auto sub = changefeed::subscribe(users, [](const changefeed::Change& c, const changefeed::Context&) {
//       std::cout << changefeed::to_string(c.operation) << ' ' << c.doc_id << '\n';
//   });                                  // runs until sub is cancelled or destroyed
//
//   auto open = changefeed::subscribe(orders, {.filter = changefeed::field("status") == "open"});
//   for (const auto& c : open.changes(stop_token)) ...   // or open.next(stop_token)
//
// What a subscription delivers:
// - Hot: only changes committed after subscribe() returned; nothing is
//   replayed, nothing is stored.  A process that restarts misses what was
//   written meanwhile -- use a Processor when that matters.
// - Read from the change log and woken by the notifier's LISTEN channel, so
//   writes of every connection and process are seen; a transaction's changes
//   arrive together, in write order, after it committed; rolled-back writes
//   never arrive.  Survives reconnects without loss (the position is kept).
// - Filters run in the database (changefeed.read's jsonpath filter), as a
//   view the filter defines: a create is tested against the new document, a
//   delete against the previous image (passed through when the collection
//   keeps none: there is nothing to test), a replace against both: one that
//   makes the document match arrives as a create, one that makes it stop
//   matching as a delete (with the document before), one that matches on
//   both sides as a replace (SubscriptionOptions::filter_moves, the default;
//   without previous images, or with filter_moves false, a replace is tested
//   against the new document).  A clear always passes.
// - subscribe() checks that the role may read the feed (SELECT on the table,
//   its tenant binding): Error(permission_denied) otherwise.
// - Subscriptions of one connection string share two connections (one
//   LISTENing, one reading), however many there are, and those of one
//   collection with the same filter share each read: a wake-up reads once
//   per distinct filter, whatever the number of subscriptions.
#pragma once

#include <changefeed/change.hpp>
#include <changefeed/collection.hpp>
#include <changefeed/subscription_options.hpp>

#include <chrono>
#include <cstddef>
#include <iterator>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>

namespace changefeed {

namespace detail {
struct SubscriptionState;
}

class Subscription {
public:
    Subscription() = default;
    ~Subscription();  // cancels
    Subscription(Subscription&&) noexcept;
    Subscription& operator=(Subscription&&) noexcept;
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

    // Stops delivering and releases the subscription's share of resources
    // (waits for a running callback unless called from inside it).  Idempotent.
    void cancel();
    // Not cancelled and not ended by an error.
    bool active() const;
    // Why the subscription ended on its own (collection_not_enabled, history_lost, ...); empty otherwise.
    std::error_code error() const;

    // Returns once every change committed before `position` that this
    // subscription takes has been handed over: its callback returned (or, in
    // pull mode, next() took it).  `position`: changefeed.current_position()
    // after the write.  Throws Error: wait_timed_out after `timeout`,
    // malformed_position / foreign_position, or what ended the subscription.
    void wait_for(const std::string& position, std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;
    // wait_for() the position of now: everything committed before the call.
    void wait_until_caught_up(std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

    // Pull mode (subscriptions made without a callback): the next change,
    // waiting for one; nullopt once `stop` is requested, the subscription is
    // cancelled or it ended.
    std::optional<Change> next(std::stop_token stop = {});
    // The next change if one is waiting.
    std::optional<Change> try_next();

    // `for (const auto& c : sub.changes(stop))`: next() as a range.
    class Range;
    Range changes(std::stop_token stop = {});

private:
    friend Subscription subscribe(const Collection&, SubscriptionOptions);
    friend Subscription subscribe(const Collection&, ChangeCallback, SubscriptionOptions);
    explicit Subscription(std::shared_ptr<detail::SubscriptionState> s) : state_(std::move(s)) {}
    std::shared_ptr<detail::SubscriptionState> state_;
};

class Subscription::Range {
public:
    class iterator {
    public:
        using value_type = Change;
        using difference_type = std::ptrdiff_t;
        iterator() = default;
        const Change& operator*() const { return *current_; }
        const Change* operator->() const { return &*current_; }
        iterator& operator++() {
            current_ = sub_->next(stop_);
            return *this;
        }
        void operator++(int) { ++*this; }
        bool operator==(std::default_sentinel_t) const { return !current_; }

    private:
        friend class Range;
        iterator(Subscription* s, std::stop_token st) : sub_(s), stop_(std::move(st)) { current_ = sub_->next(stop_); }
        Subscription* sub_ = nullptr;
        std::stop_token stop_;
        std::optional<Change> current_;
    };
    iterator begin() { return iterator(sub_, stop_); }
    std::default_sentinel_t end() { return {}; }

private:
    friend class Subscription;
    Range(Subscription* s, std::stop_token st) : sub_(s), stop_(std::move(st)) {}
    Subscription* sub_;
    std::stop_token stop_;
};

inline Subscription::Range Subscription::changes(std::stop_token stop) { return Range(this, std::move(stop)); }

// A pull subscription.  Throws Error: collection_not_found, collection_not_enabled,
// invalid_option (a filter the server refuses), connection_failed.
Subscription subscribe(const Collection& collection, SubscriptionOptions options = {});
// A callback subscription: `callback` runs on the subscription's own thread, one change at a time.
Subscription subscribe(const Collection& collection, ChangeCallback callback, SubscriptionOptions options = {});
// One document's changes (and clears).
Subscription watch(const Collection& collection, std::string id, SubscriptionOptions options = {});
Subscription watch(const Collection& collection, std::string id, ChangeCallback callback,
                   SubscriptionOptions options = {});

}  // namespace changefeed
