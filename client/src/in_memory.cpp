// The in-memory provider.  A position per (processor name, range) mirrors the
// server's: `lo` (every change up to it was delivered) and, while a window is
// paged, the window's end `hi` and the last seq delivered in it.
#include <changefeed/in_memory.hpp>

#include "names.hpp"
#include "consumer_policy.hpp"
#include "processor_impl.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace changefeed {
namespace detail {

struct Entry {
    std::int64_t seq = 0;
    Operation op = Operation::create;
    std::string doc_id;
    std::string range;
    boost::json::value current, previous;
    std::chrono::system_clock::time_point written_at;
};

// What a write call asks for; the operation it records follows from whether the id exists.
enum class WriteKind { create, replace, upsert };

struct Position {
    std::int64_t lo = 0, hi = 0, after = 0;  // hi = 0: no window open
};

struct NameState {
    std::int64_t start = 0;  // where ranges without a position of their own begin
    std::map<std::string, Position> ranges;
    // start_from_beginning: ranges still to scan, and the last id delivered.
    std::map<std::string, std::optional<std::string>> backfill;
};

struct MemoryStore {
    InMemoryOptions options;
    mutable std::mutex mu;
    std::condition_variable cv;  // notified on every write and stop
    std::map<std::string, boost::json::object> docs;
    std::map<std::string, std::string> range_of_doc;
    std::map<std::string, int> range_ids;  // range -> number, by first appearance
    std::deque<Entry> log;
    std::int64_t last_seq = 0;
    bool recording = false;
    std::map<std::string, NameState> names;  // the stored checkpoints
    std::set<const NameState*> running;      // the cursors of running processors

    std::string text_of(const boost::json::object& doc, const std::string& field) const {
        auto it = doc.find(field);
        if (it == doc.end() || it->value().is_null())
            throw Error(errc::invalid_option, "the document has no \"" + field + "\"");
        if (it->value().is_string()) return std::string(it->value().as_string());
        return boost::json::serialize(it->value());
    }
    std::string id_of(const boost::json::object& doc) const {
        if (options.key.size() == 1) return text_of(doc, options.key[0]);
        boost::json::array parts;
        for (const auto& k : options.key) parts.emplace_back(text_of(doc, k));
        return boost::json::serialize(parts);
    }
    std::string range_of(const boost::json::object& doc) const {
        const auto& fields = options.partition_key.empty() ? options.key : options.partition_key;
        std::string out;
        for (std::size_t i = 0; i < fields.size(); ++i) {
            if (i) out += '/';
            out += text_of(doc, fields[i]);
        }
        return out;
    }

    // Under mu.
    void record(Operation op, const std::string& id, const std::string& range, boost::json::value current,
                boost::json::value previous) {
        range_ids.emplace(range, static_cast<int>(range_ids.size()));
        ++last_seq;
        if (!recording) return;
        if (!options.keep_previous) previous = nullptr;
        log.push_back(Entry{last_seq, op, id, range, std::move(current), std::move(previous),
                            std::chrono::system_clock::now()});
    }

    void write(WriteKind kind, boost::json::object doc) {
        {
            std::lock_guard lock(mu);
            auto id = id_of(doc);
            auto range = range_of(doc);
            auto it = docs.find(id);
            if (kind == WriteKind::create && it != docs.end())
                throw Error(errc::invalid_option, "a document with id " + id + " exists");
            if (kind == WriteKind::replace && it == docs.end())
                throw Error(errc::invalid_option, "no document with id " + id);
            boost::json::value previous = nullptr;
            auto op = Operation::create;
            if (it != docs.end()) {
                previous = it->second;
                op = Operation::replace;
            }
            docs[id] = doc;
            range_of_doc[id] = range;
            record(op, id, range, boost::json::value(std::move(doc)), std::move(previous));
        }
        cv.notify_all();
    }

    // The oldest entry any name could still read; older ones go.
    void trim() {
        if (names.empty()) return;
        std::int64_t keep_after = last_seq;
        auto consider = [&](const NameState& ns) {
            keep_after = std::min(keep_after, ns.start);
            for (const auto& [range, pos] : ns.ranges) keep_after = std::min(keep_after, pos.lo);
        };
        for (const auto& [name, ns] : names) consider(ns);
        for (const auto* ns : running) consider(*ns);
        while (!log.empty() && log.front().seq <= keep_after) log.pop_front();
    }
};

namespace {

Change change_of(const Entry& e, const MemoryStore& s) {
    Change c;
    c.operation = e.op;
    c.doc_id = e.doc_id;
    c.partition_key = e.op == Operation::clear ? std::string() : e.range;
    c.range_id = s.range_ids.at(e.range);
    c.current = e.current;
    c.previous = e.previous;
    c.written_at = e.written_at;
    c.seq = e.seq;
    c.txid = static_cast<std::uint64_t>(e.seq);
    return c;
}

class MemoryProcessor final : public ProcessorImpl {
public:
    MemoryProcessor(std::shared_ptr<MemoryStore> store, std::string name, Handler handler, FeedSettings feed)
        : store_(std::move(store)), name_(std::move(name)), handler_(std::move(handler)),
          opt_(std::move(feed.common)), mode_(feed.mode), start_from_beginning_(feed.start_from_beginning),
          events_(opt_.on_error, opt_.on_state_change) {
        detail::check_processor_name(name_, name_);
        // Tenants are not modelled here: refusing the option beats ignoring it
        // (a test would see every tenant's changes and pass for the wrong reason).
        if (!opt_.tenant.empty())
            throw Error(errc::invalid_option, "the in-memory provider does not support the tenant option");
        if (!handler_) throw Error(errc::invalid_option, "the handler must not be empty");
        if (opt_.max_batch_size < 1 || opt_.max_batch_size > 100000)
            throw Error(errc::invalid_option, "max_batch_size must be between 1 and 100000");
        if (opt_.poll_interval <= std::chrono::milliseconds(0) || opt_.retry_delay < std::chrono::milliseconds(0))
            throw Error(errc::invalid_option, "intervals must be positive");
        instance_ = opt_.instance_name.empty() ? "in-memory" : opt_.instance_name;
        detail::check_instance_name(instance_);
    }
    ~MemoryProcessor() override { stop(); }

    void start() override {
        std::lock_guard guard(start_mu_);
        if (thread_.joinable()) throw Error(errc::already_started, "processor \"" + name_ + "\" is already started");
        set_state(State::starting);
        {
            std::lock_guard lock(store_->mu);
            store_->recording = true;
            if (!store_->names.count(name_)) {
                NameState ns;
                ns.start = store_->last_seq;
                if (start_from_beginning_ && mode_ == FeedMode::latest_version)
                    for (const auto& [id, range] : store_->range_of_doc) ns.backfill.emplace(range, std::nullopt);
                store_->names.emplace(name_, std::move(ns));
            }
            // Each instance reads with its own cursor from the stored
            // checkpoint (no lease contention: two instances both see all).
            cursor_ = store_->names.at(name_);
            store_->running.insert(&cursor_);
            stopping_ = false;
        }
        stop_source_ = std::stop_source();
        set_state(State::running);
        thread_ = std::jthread([this] {
            run();
            // Destroyed from inside the handler: this thread is the last owner.
            if (std::unique_ptr<ProcessorImpl> self = std::move(disposed_self_)) {
                finish_stop();
                // `self` frees this processor here; nothing of it is touched after.
            }
        });
    }

    void stop() override {
        if (std::this_thread::get_id() == thread_.get_id()) {  // from the handler: only ask
            request_stop();
            return;
        }
        std::lock_guard guard(start_mu_);
        if (!thread_.joinable()) return;
        request_stop();
        thread_.join();
        finish_stop();
    }

    bool on_handler_thread() const override { return std::this_thread::get_id() == thread_.get_id(); }

    void dispose_from_handler(std::unique_ptr<ProcessorImpl> self) override {
        disposed_self_ = std::move(self);
        request_stop();
        thread_.detach();  // it ends on its own once the handler returned, and frees us
    }

    State current_state() const override { return events_.state(); }
    const std::string& processor_name() const override { return name_; }
    const std::string& instance_name() const override { return instance_; }
    std::vector<int> owned_ranges() const override {
        std::lock_guard lock(store_->mu);
        std::vector<int> out;
        for (const auto& [range, id] : store_->range_ids) out.push_back(id);
        std::sort(out.begin(), out.end());
        return out;
    }

private:
    using Clock = std::chrono::steady_clock;

    void request_stop() {
        {
            std::lock_guard lock(store_->mu);
            stopping_ = true;
        }
        stop_source_.request_stop();
        store_->cv.notify_all();
    }

    void set_state(State s) { events_.set_state(s); }

    void finish_stop() {
        {
            std::lock_guard lock(store_->mu);
            store_->running.erase(&cursor_);
        }
        set_state(State::stopped);
    }

    // Under mu: the next batch of `range` and the position after it.
    std::vector<Change> next_batch(const std::string& range, Position& pos, std::optional<std::string>& backfill_after,
                                   bool& backfilling) {
        auto& ns = cursor_;
        std::vector<Change> out;
        const auto max = static_cast<std::size_t>(opt_.max_batch_size);
        if (auto b = ns.backfill.find(range); b != ns.backfill.end()) {
            backfilling = true;
            auto it = b->second ? store_->docs.upper_bound(*b->second) : store_->docs.begin();
            for (; it != store_->docs.end() && out.size() < max; ++it) {
                if (store_->range_of_doc.at(it->first) != range) continue;
                Change c;
                c.operation = Operation::create;
                c.doc_id = it->first;
                c.partition_key = range;
                c.range_id = store_->range_ids.at(range);
                c.current = it->second;
                c.from_backfill = true;
                out.push_back(std::move(c));
                backfill_after = it->first;
            }
            return out;
        }
        auto p = ns.ranges.find(range);
        pos = p != ns.ranges.end() ? p->second : Position{ns.start, 0, 0};
        for (int windows = 0; windows < 2 && out.empty(); ++windows) {
            if (pos.hi == 0) {
                if (store_->last_seq <= pos.lo) return out;
                pos.hi = store_->last_seq;
                pos.after = 0;
            }
            std::vector<const Entry*> window;
            for (const auto& e : store_->log)
                if (e.seq > pos.lo && e.seq <= pos.hi && e.range == range) window.push_back(&e);
            std::vector<const Entry*> picked;
            if (mode_ == FeedMode::all_versions_and_deletes) {
                picked = window;
            } else {
                // Per document the latest version; none when it is a delete or
                // a later clear of the range wiped it (as read(mode => 'latest')).
                std::map<std::string, const Entry*> latest;
                std::int64_t last_clear = 0;
                for (const auto* e : window) {
                    if (e->op == Operation::clear) last_clear = e->seq;
                    else latest[e->doc_id] = e;
                }
                for (const auto& [id, e] : latest)
                    if (e->op != Operation::delete_ && e->seq > last_clear) picked.push_back(e);
                std::sort(picked.begin(), picked.end(), [](auto* a, auto* b) { return a->seq < b->seq; });
            }
            std::size_t remaining = 0;
            for (const auto* e : picked) {
                if (e->seq <= pos.after) continue;
                if (out.size() == max) {
                    ++remaining;
                    break;
                }
                out.push_back(change_of(*e, *store_));
            }
            if (remaining) {
                pos.after = out.back().seq;
            } else {  // window exhausted
                pos.lo = pos.hi;
                pos.hi = 0;
                pos.after = 0;
            }
        }
        return out;
    }

    void run() {
        std::map<std::string, Clock::time_point> retry_at;
        std::unique_lock lock(store_->mu);
        while (!stopping_) {
            bool busy = false;
            auto next_retry = Clock::now() + opt_.poll_interval;
            std::vector<std::string> ranges;
            for (const auto& [range, id] : store_->range_ids) ranges.push_back(range);
            for (const auto& range : ranges) {
                if (stopping_) break;
                if (auto r = retry_at.find(range); r != retry_at.end() && Clock::now() < r->second) {
                    next_retry = std::min(next_retry, r->second);
                    continue;
                }
                Position pos;
                std::optional<std::string> backfill_after;
                bool backfilling = false;
                auto batch = next_batch(range, pos, backfill_after, backfilling);
                if (batch.empty()) {
                    if (backfilling) save_backfill(range, std::nullopt, true);
                    else save(range, pos);  // moving past empty windows loses nothing
                    continue;
                }
                Context ctx{store_->range_ids.at(range), name_, instance_, 1, range, {}, {}};
                lock.unlock();
                bool ok = true;
                try {
                    handler_(batch, ctx, stop_source_.get_token());
                } catch (...) {
                    ok = false;
                    report(ctx.range_id, std::current_exception());
                }
                lock.lock();
                busy = true;
                if (!ok) {
                    retry_at[range] = Clock::now() + opt_.retry_delay;
                    continue;
                }
                retry_at.erase(range);
                // The checkpoint: only after the handler returned.
                if (backfilling)
                    save_backfill(range, backfill_after,
                                  batch.size() < static_cast<std::size_t>(opt_.max_batch_size));
                else
                    save(range, pos);
                store_->trim();
            }
            if (!busy) store_->cv.wait_until(lock, next_retry);
        }
    }

    // Under mu: moves this instance's cursor and the name's stored checkpoint.
    void save(const std::string& range, const Position& pos) {
        cursor_.ranges[range] = pos;
        store_->names.at(name_).ranges[range] = pos;
    }
    void save_backfill(const std::string& range, std::optional<std::string> after, bool done) {
        for (auto* ns : {&cursor_, &store_->names.at(name_)}) {
            if (done) ns->backfill.erase(range);
            else ns->backfill[range] = after;
        }
    }

    void report(int range, std::exception_ptr p) { events_.report_handler_failure(range, p, "handler failed"); }

    std::shared_ptr<MemoryStore> store_;
    NameState cursor_;  // under store_->mu
    std::string name_, instance_;
    Handler handler_;
    ProcessorOptions opt_;
    FeedMode mode_;
    bool start_from_beginning_;
    ConsumerEvents events_;
    std::mutex start_mu_;
    bool stopping_ = false;  // under store_->mu
    std::stop_source stop_source_;
    std::unique_ptr<ProcessorImpl> disposed_self_;  // set when destroyed from the handler
    std::jthread thread_;
};

}  // namespace
}  // namespace detail

InMemoryCollection::InMemoryCollection(InMemoryOptions options) : store_(std::make_shared<detail::MemoryStore>()) {
    if (options.key.empty()) throw Error(errc::invalid_option, "the key needs at least one field");
    store_->options = std::move(options);
}

InMemoryCollection::~InMemoryCollection() = default;

void InMemoryCollection::create(boost::json::object d) { store_->write(detail::WriteKind::create, std::move(d)); }
void InMemoryCollection::replace(boost::json::object d) { store_->write(detail::WriteKind::replace, std::move(d)); }
void InMemoryCollection::upsert(boost::json::object d) { store_->write(detail::WriteKind::upsert, std::move(d)); }

bool InMemoryCollection::delete_(const std::string& id) {
    {
        std::lock_guard lock(store_->mu);
        auto it = store_->docs.find(id);
        if (it == store_->docs.end()) return false;
        auto range = store_->range_of_doc.at(id);
        boost::json::value previous = std::move(it->second);
        store_->docs.erase(it);
        store_->range_of_doc.erase(id);
        store_->record(Operation::delete_, id, range, nullptr, std::move(previous));
    }
    store_->cv.notify_all();
    return true;
}

void InMemoryCollection::clear() {
    {
        std::lock_guard lock(store_->mu);
        store_->docs.clear();
        store_->range_of_doc.clear();
        std::vector<std::string> ranges;
        for (const auto& [range, id] : store_->range_ids) ranges.push_back(range);
        for (const auto& r : ranges) store_->record(Operation::clear, "", r, nullptr, nullptr);
    }
    store_->cv.notify_all();
}

std::optional<boost::json::object> InMemoryCollection::get(const std::string& id) const {
    std::lock_guard lock(store_->mu);
    auto it = store_->docs.find(id);
    if (it == store_->docs.end()) return std::nullopt;
    return it->second;
}

std::size_t InMemoryCollection::size() const {
    std::lock_guard lock(store_->mu);
    return store_->docs.size();
}

std::string InMemoryCollection::id_of(const boost::json::object& document) const { return store_->id_of(document); }

Processor InMemoryCollection::make_processor(std::string name, Handler handler, LatestVersionOptions options) {
    return detail::ProcessorAccess::make(std::make_unique<detail::MemoryProcessor>(
        store_, std::move(name), std::move(handler), detail::FeedSettings::of(std::move(options))));
}

Processor InMemoryCollection::make_processor(std::string name, Handler handler, AllVersionsOptions options) {
    return detail::ProcessorAccess::make(std::make_unique<detail::MemoryProcessor>(
        store_, std::move(name), std::move(handler), detail::FeedSettings::of(std::move(options))));
}

Processor make_latest_version_processor(InMemoryCollection& c, std::string name, Handler handler,
                                        LatestVersionOptions options) {
    return c.make_processor(std::move(name), std::move(handler), std::move(options));
}

Processor make_all_versions_processor(InMemoryCollection& c, std::string name, Handler handler,
                                      AllVersionsOptions options) {
    return c.make_processor(std::move(name), std::move(handler), std::move(options));
}

}  // namespace changefeed
