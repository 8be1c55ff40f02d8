// The in-memory provider.  A position per (processor name, range) mirrors the
// server's: `lo` (every change up to it was delivered) and, while a window is
// paged, the window's end `hi` and the last seq delivered in it.  The
// collection keeps, per processor name, the stored checkpoints and the
// projector's deduplication store, so that both survive a processor restart.
#include <changefeed/in_memory.hpp>

#include "core/db.hpp"
#include "core/names.hpp"
#include "deliver/projection_policy.hpp"
#include "processor/processor_impl.hpp"
#include "read/feed_mode.hpp"
#include "supervise/consumer_policy.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

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

namespace {

// Whether `a` is behind `b`: an earlier lo, or the same lo with less of its window delivered.
bool behind(const Position& a, const Position& b) {
    return std::tuple(a.lo, a.hi != 0, a.after) < std::tuple(b.lo, b.hi != 0, b.after);
}

std::string text_of(const Position& p) {
    if (p.hi == 0) return "mem." + std::to_string(p.lo);
    return "mem." + std::to_string(p.lo) + "." + std::to_string(p.hi) + "." + std::to_string(p.after);
}

// "mem.<lo>" or "mem.<lo>.<hi>.<after>"; Error(malformed_position) for anything else.
Position parse_position(const std::string& text) {
    auto bad = [&] {
        return Error(errc::malformed_position,
                     "\"" + text + "\" is not a position of the in-memory provider (mem.<seq>)");
    };
    const std::string prefix = "mem.";
    if (text.compare(0, prefix.size(), prefix) != 0) throw bad();
    std::vector<std::int64_t> parts;
    const char* p = text.data() + prefix.size();
    const char* end = text.data() + text.size();
    while (true) {
        std::int64_t v = 0;
        auto [next, ec] = std::from_chars(p, end, v);
        if (ec != std::errc() || next == p || v < 0) throw bad();
        parts.push_back(v);
        if (next == end) break;
        if (*next != '.') throw bad();
        p = next + 1;
    }
    if (parts.size() == 1) return Position{parts[0], 0, 0};
    if (parts.size() == 3 && parts[0] < parts[2] && parts[2] <= parts[1]) return Position{parts[0], parts[1], parts[2]};
    throw bad();
}

}  // namespace

struct NameState {
    std::int64_t start = 0;  // where ranges without a position of their own begin
    std::map<std::string, Position> ranges;
    // start_from_beginning: ranges still to scan, and the last id delivered.
    std::map<std::string, std::optional<std::string>> backfill;
    int backfill_number = 0;  // names the backfill in its rows' event ids
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
    // The log holds every write after recorded_after, the last one before
    // recording began at recording_since.
    std::int64_t recorded_after = 0;
    std::optional<std::chrono::system_clock::time_point> recording_since;
    int backfills = 0;
    std::map<std::string, NameState> names;  // the stored checkpoints
    // Per processor name, the event ids its projector applied (the deduplication store).
    std::map<std::string, std::set<std::string>> applied;
    // What transactional handlers wrote: projection -> key -> value.
    std::map<std::string, std::map<std::string, boost::json::value>> projections;

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

    // Under mu: from now on every write is kept in the log until read.
    void start_recording() {
        if (recording) return;
        recording = true;
        recording_since = std::chrono::system_clock::now();
        recorded_after = last_seq;
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

    // Under mu: a transaction's writes become the projections'.
    void apply(std::map<std::string, std::map<std::string, std::optional<boost::json::value>>>& writes) {
        for (auto& [name, values] : writes) {
            auto& projection = projections[name];
            for (auto& [key, value] : values) {
                if (value) projection[key] = std::move(*value);
                else projection.erase(key);
            }
        }
    }
};

struct MemoryTransactionAccess {
    static std::unique_ptr<InMemoryTransaction> make(std::shared_ptr<MemoryStore> store) {
        return std::unique_ptr<InMemoryTransaction>(new InMemoryTransaction(std::move(store)));
    }
    static auto& writes(InMemoryTransaction& tx) { return tx.writes_; }
    static void set_sql(InMemoryTransaction& tx, pqxx::transaction_base* sql) { tx.sql_ = sql; }
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
    if (!c.current.is_null()) c.current_json = boost::json::serialize(c.current);
    if (!c.previous.is_null()) c.previous_json = boost::json::serialize(c.previous);
    c.written_at = e.written_at;
    c.seq = e.seq;
    c.txid = static_cast<std::uint64_t>(e.seq);
    c.event_id = "mem." + std::to_string(e.seq);
    return c;
}

// As on PostgreSQL: every change up to the position handled and stored as
// the name's checkpoint, in every range (manual checkpoints count when the
// handler stored them).
void wait_for_name(MemoryStore& store, const std::string& name, const std::string& position,
                   std::chrono::milliseconds timeout) {
    if (timeout.count() < 0 || timeout > std::chrono::hours(1))
        throw Error(errc::invalid_option, "the timeout of wait_for must be between 0 and 1 hour");
    const Position target = parse_position(position);
    const std::int64_t upto = target.hi ? std::max(target.lo, target.after) : target.lo;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::unique_lock lock(store.mu);
    if (upto > store.last_seq)
        throw Error(errc::foreign_position, "position " + position + " lies beyond this collection's last write");
    for (;;) {
        const auto ns = store.names.find(name);
        if (ns == store.names.end())
            throw Error(errc::processor_not_found,
                        "processor \"" + name + "\" has never run on this collection. Hint: start it first");
        std::map<std::string, int> behind;
        for (const auto& e : store.log) {
            if (e.seq > upto) break;
            const auto r = ns->second.ranges.find(e.range);
            const Position p = r != ns->second.ranges.end() ? r->second : Position{ns->second.start, 0, 0};
            if (e.seq > (p.hi ? std::max(p.lo, p.after) : p.lo)) ++behind[e.range];
        }
        if (behind.empty()) return;
        if (std::chrono::steady_clock::now() >= deadline) {
            std::string ranges;
            for (const auto& [range, n] : behind)
                ranges += (ranges.empty() ? "" : ", ") + range + " (" + std::to_string(n) + ")";
            throw Error(errc::wait_timed_out, "processor \"" + name + "\" has not handled every change before " +
                                                  position + " in time; ranges behind: " + ranges);
        }
        store.cv.wait_until(lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(10)));
    }
}

class MemoryProcessor final : public ProcessorImpl {
public:
    MemoryProcessor(std::shared_ptr<MemoryStore> store, std::string name, ProcessorHandler consumer, FeedSettings feed)
        : store_(std::move(store)), name_(std::move(name)), consumer_(std::move(consumer)),
          opt_(std::move(feed.common)), mode_(feed.mode), start_from_beginning_(feed.start_from_beginning),
          events_(opt_.on_error, opt_.on_state_change, opt_.recovery, nullptr, opt_.log),
          counters_(opt_.duplicate_alert_share, opt_.duplicate_alert_window) {
        detail::check_processor_name(name_, name_);
        // Tenants are not modelled here: refusing the option beats ignoring it
        // (a test would see every tenant's changes and pass for the wrong reason).
        if (!opt_.tenant.empty())
            throw Error(errc::invalid_option, "the in-memory provider does not support the tenant option");
        if (!opt_.read_connection.empty())
            throw Error(errc::invalid_option, "the in-memory provider does not support the read_connection option");
        if (opt_.max_batch_size < 1 || opt_.max_batch_size > 100000)
            throw Error(errc::invalid_option, "max_batch_size must be between 1 and 100000");
        if (opt_.poll_interval <= std::chrono::milliseconds(0) || opt_.retry_delay < std::chrono::milliseconds(0))
            throw Error(errc::invalid_option, "intervals must be positive");
        check_handler(consumer_, opt_);
        if (int(opt_.start_time.has_value()) + int(!opt_.start_position.empty()) + int(start_from_beginning_) > 1)
            throw Error(errc::invalid_option,
                        "at most one of start_time, start_position and start_from_beginning may be given");
        instance_ = opt_.instance_name.empty() ? "in-memory" : opt_.instance_name;
        detail::check_instance_name(instance_);
    }
    ~MemoryProcessor() override { stop(); }

    void start() override {
        std::lock_guard guard(start_mu_);
        if (thread_.joinable()) throw Error(errc::already_started, "processor \"" + name_ + "\" is already started");
        set_state(State::starting);
        try {
            // Checked even when a checkpoint wins: a bad option is a bug either way.
            std::optional<Position> from;
            if (!opt_.start_position.empty()) from = parse_position(opt_.start_position);
            std::lock_guard lock(store_->mu);
            store_->start_recording();
            if (!store_->names.count(name_)) store_->names.emplace(name_, first_state(from));
            // Each instance reads with its own cursor from the stored
            // checkpoint (no lease contention: two instances both see all).
            cursor_ = store_->names.at(name_);
            stopping_ = false;
        } catch (...) {
            set_state(State::stopped);
            throw;
        }
        stop_source_ = std::stop_source();
        halted_.clear();
        failures_.clear();
        owned_.clear();
        counters_.reset();
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
    ProjectionStats projection_stats() const override { return counters_.stats(); }

    void wait_for(const std::string& position, std::chrono::milliseconds timeout) const override {
        wait_for_name(*store_, name_, position, timeout);
    }

    std::string current_position() const override {
        std::lock_guard lock(store_->mu);
        return text_of(Position{store_->last_seq, 0, 0});
    }

private:
    using Clock = std::chrono::steady_clock;

    // Under mu: where a name without checkpoints starts.
    NameState first_state(const std::optional<Position>& from) {
        NameState ns;
        ns.start = store_->last_seq;
        if (opt_.start_time) {
            // From before the recording began: its first change, as a
            // start_time from before enable() on PostgreSQL (no retention here).
            const auto t = *opt_.start_time;
            for (const auto& e : store_->log)
                if (e.written_at >= t) {
                    ns.start = e.seq - 1;
                    break;
                }
        } else if (from) {
            if (from->lo > store_->last_seq || from->hi > store_->last_seq)
                throw Error(errc::foreign_position, "processor \"" + name_ + "\": position " + opt_.start_position +
                                                        " lies beyond this collection's last write");
            if (from->lo < store_->recorded_after)
                throw Error(errc::history_lost, "processor \"" + name_ +
                                                    "\": the collection does not hold "
                                                    "the writes after position " +
                                                    opt_.start_position +
                                                    " (it records them from the first processor's start on)");
            ns.start = from->lo;  // a paged window restarts from its beginning
        } else if (start_from_beginning_ && mode_ == FeedMode::latest_version) {
            for (const auto& [id, range] : store_->range_of_doc) ns.backfill.emplace(range, std::nullopt);
            ns.backfill_number = ++store_->backfills;
        }
        return ns;
    }

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
        std::vector<int> released;
        {
            std::lock_guard lock(store_->mu);
            for (const auto& range : owned_) released.push_back(store_->range_ids.at(range));
        }
        owned_.clear();
        for (int id : released) callback(opt_.on_lease_released, id);
        if (events_.state() != State::history_lost) set_state(State::stopped);
    }

    static void callback(const std::function<void(int)>& f, int range_id) {
        if (!f) return;
        try {
            f(range_id);
        } catch (...) {
        }
    }

    bool manual() const { return opt_.checkpoint_mode == CheckpointMode::manual; }

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
                c.current_json = boost::json::serialize(c.current);
                c.from_backfill = true;
                c.event_id = "mem.b" + std::to_string(ns.backfill_number) + "." + it->first;
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
            auto from = std::upper_bound(store_->log.begin(), store_->log.end(), pos.lo,
                                         [](std::int64_t seq, const Entry& e) { return seq < e.seq; });
            for (auto e = from; e != store_->log.end() && e->seq <= pos.hi; ++e)
                if (e->range == range) window.push_back(&*e);
            std::vector<const Entry*> picked;
            if (mode_ != FeedMode::latest_version) {
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

    // What one delivery left behind.
    struct Delivery {
        std::exception_ptr failure;
        std::vector<std::string> applied_ids;              // to record in the deduplication store
        std::unique_ptr<InMemoryTransaction> transaction;  // its writes, to apply with the checkpoint
    };

    // Calls the consumer; never throws.  Runs without mu.
    Delivery deliver(const std::vector<Change>& batch, const Context& ctx, const std::vector<bool>& known) {
        Delivery d;
        try {
            if (const auto* handler = std::get_if<Handler>(&consumer_)) {
                (*handler)(batch, ctx);
            } else if (const auto* transactional = std::get_if<TransactionalHandler>(&consumer_)) {
                d.transaction = MemoryTransactionAccess::make(store_);
                std::unique_ptr<pqxx::work> sql;
                if (!store_->options.projection_database.empty()) {
                    if (!sql_conn_ || !sql_conn_->is_open()) sql_conn_ = connect(store_->options.projection_database);
                    sql = std::make_unique<pqxx::work>(*sql_conn_);
                    MemoryTransactionAccess::set_sql(*d.transaction, sql.get());
                }
                (*transactional)(batch, *d.transaction, ctx);
                MemoryTransactionAccess::set_sql(*d.transaction, nullptr);
                // Committed before the checkpoint, which cannot fail after it.
                if (sql) translated([&] { sql->commit(); });
            } else {
                for (std::size_t i = 0; i < batch.size(); ++i) {
                    if (known[i]) {  // applied before: not given to the projector again
                        outcome(true);
                        continue;
                    }
                    const auto result = std::get<Projector>(consumer_)(batch[i], ctx);
                    d.applied_ids.push_back(batch[i].event_id);
                    outcome(result != ProjectionResult::applied);
                }
            }
        } catch (...) {
            d.failure = std::current_exception();
            d.transaction.reset();  // its writes are discarded
        }
        return d;
    }

    // A projector's outcome for one change; duplicates_rising as on PostgreSQL.
    void outcome(bool duplicate) {
        if (auto alert = counters_.count(duplicate)) events_.report(std::nullopt, *alert);
    }

    // A failed delivery: asks the recovery policy, tells on_error; whether the range halts.  Runs without mu.
    bool failed(const std::string& range, int range_id, std::exception_ptr p) {
        const int consecutive = ++failures_[range];
        const Error e = handler_failure(p, culprit_of(consumer_));
        const Incident incident{Situation::handler_failing, range_id, e.code(), e.what(), consecutive};
        const RecoveryDecision decision = events_.decide(incident);
        events_.report_decided(range_id, e, p, decision);
        return decision.halts();
    }

    // Context::checkpoint of a manual processor: stores where this batch
    // ended, unless the stored checkpoint is already past it.  Holds no
    // pointer to the processor, so it stays safe to call after a stop.
    std::function<void()> checkpoint_of(const std::string& range, bool backfilling, const Position& pos,
                                        const std::optional<std::string>& backfill_after, bool backfill_done) {
        return [store = store_, name = name_, range, backfilling, pos, backfill_after, backfill_done] {
            std::lock_guard lock(store->mu);
            auto& ns = store->names.at(name);
            auto b = ns.backfill.find(range);
            if (backfilling) {
                if (b == ns.backfill.end()) return;  // the stored backfill is past it
                if (backfill_done) ns.backfill.erase(b);
                else if (!b->second || *b->second < *backfill_after) b->second = backfill_after;
                return;
            }
            auto r = ns.ranges.find(range);
            const Position stored = r != ns.ranges.end() ? r->second : Position{ns.start, 0, 0};
            if (!behind(stored, pos)) return;
            if (b != ns.backfill.end()) ns.backfill.erase(b);  // a log position comes after the whole backfill
            ns.ranges[range] = pos;
        };
    }

    void run() {
        std::map<std::string, Clock::time_point> retry_at;
        std::unique_lock lock(store_->mu);
        while (!stopping_) {
            bool busy = false;
            auto next_retry = Clock::now() + opt_.poll_interval;
            std::vector<std::string> ranges;
            for (const auto& [range, id] : store_->range_ids) ranges.push_back(range);
            // No leases here: a range is "acquired" when this processor first sees it.
            std::vector<int> acquired;
            for (const auto& range : ranges)
                if (owned_.insert(range).second) acquired.push_back(store_->range_ids.at(range));
            if (!acquired.empty() && opt_.on_lease_acquired) {
                lock.unlock();
                for (int id : acquired) callback(opt_.on_lease_acquired, id);
                lock.lock();
            }
            for (const auto& range : ranges) {
                if (stopping_) break;
                if (halted_.count(range)) continue;
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
                const bool backfill_done = batch.size() < static_cast<std::size_t>(opt_.max_batch_size);
                Context ctx{store_->range_ids.at(range),
                            name_,
                            instance_,
                            1,
                            range,
                            backfilling ? std::string() : text_of(pos),
                            {},
                            stop_source_.get_token()};
                if (manual()) ctx.checkpoint = checkpoint_of(range, backfilling, pos, backfill_after, backfill_done);
                std::vector<bool> known;
                if (shape_of(consumer_) == HandlerShape::projector) {
                    const auto& ids = store_->applied[name_];
                    for (const auto& c : batch) known.push_back(ids.count(c.event_id) > 0);
                }
                lock.unlock();
                Delivery d = deliver(batch, ctx, known);
                lock.lock();
                busy = true;
                // Recorded also when the projector threw: those changes are applied.
                if (!d.applied_ids.empty()) {
                    auto& ids = store_->applied[name_];
                    ids.insert(d.applied_ids.begin(), d.applied_ids.end());
                }
                if (d.failure) {
                    lock.unlock();
                    const bool halt = failed(range, ctx.range_id, d.failure);
                    lock.lock();
                    if (halt) halted_.insert(range);
                    else retry_at[range] = Clock::now() + opt_.retry_delay;
                    continue;
                }
                failures_.erase(range);
                retry_at.erase(range);
                // The projection's writes and the checkpoint, together, only after the handler returned.
                if (d.transaction) store_->apply(MemoryTransactionAccess::writes(*d.transaction));
                if (backfilling) save_backfill(range, backfill_after, backfill_done);
                else save(range, pos);
            }
            if (!busy) store_->cv.wait_until(lock, next_retry);
        }
    }

    // Under mu: moves this instance's cursor and, unless checkpoints are
    // manual, the name's stored checkpoint.
    void save(const std::string& range, const Position& pos) {
        cursor_.ranges[range] = pos;
        if (!manual()) store_->names.at(name_).ranges[range] = pos;
    }
    void save_backfill(const std::string& range, std::optional<std::string> after, bool done) {
        for (auto* ns : {&cursor_, &store_->names.at(name_)}) {
            if (ns != &cursor_ && manual()) continue;
            if (done) ns->backfill.erase(range);
            else ns->backfill[range] = after;
        }
    }

    std::shared_ptr<MemoryStore> store_;
    NameState cursor_;  // under store_->mu
    std::string name_, instance_;
    const ProcessorHandler consumer_;
    ProcessorOptions opt_;
    FeedMode mode_;
    bool start_from_beginning_;
    ConsumerEvents events_;
    std::mutex start_mu_;
    bool stopping_ = false;  // under store_->mu
    std::stop_source stop_source_;
    std::unique_ptr<ProcessorImpl> disposed_self_;  // set when destroyed from the handler
    // The processor's thread only (and start/stop while it does not run):
    std::set<std::string> halted_;                // ranges the recovery policy halted
    std::unique_ptr<pqxx::connection> sql_conn_;  // to InMemoryOptions::projection_database, once used
    std::map<std::string, int> failures_;         // consecutive failures per range
    std::set<std::string> owned_;                 // ranges on_lease_acquired was told of
    ProjectionCounters counters_;
    std::jthread thread_;
};

}  // namespace
}  // namespace detail

InMemoryTransaction::InMemoryTransaction(std::shared_ptr<detail::MemoryStore> store) : store_(std::move(store)) {}

void InMemoryTransaction::put(const std::string& projection, const std::string& key, boost::json::value value) {
    writes_[projection][key] = std::move(value);
}

bool InMemoryTransaction::erase(const std::string& projection, const std::string& key) {
    const bool existed = get(projection, key).has_value();
    writes_[projection][key] = std::nullopt;
    return existed;
}

std::optional<boost::json::value> InMemoryTransaction::get(const std::string& projection,
                                                           const std::string& key) const {
    if (auto p = writes_.find(projection); p != writes_.end())
        if (auto k = p->second.find(key); k != p->second.end()) return k->second;
    std::lock_guard lock(store_->mu);
    auto p = store_->projections.find(projection);
    if (p == store_->projections.end()) return std::nullopt;
    auto k = p->second.find(key);
    if (k == p->second.end()) return std::nullopt;
    return k->second;
}

pqxx::transaction_base& InMemoryTransaction::sql() {
    if (sql_) return *sql_;
    throw Error(errc::invalid_option,
                "the in-memory provider has no SQL transaction: write the projection through memory(), or give "
                "InMemoryOptions::projection_database a scratch database for tx.sql()");
}

InMemoryCollection::InMemoryCollection(InMemoryOptions options) : store_(std::make_shared<detail::MemoryStore>()) {
    if (options.key.empty()) throw Error(errc::invalid_option, "the key needs at least one field");
    store_->options = std::move(options);
    if (store_->options.record_from_start) store_->start_recording();
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

std::string InMemoryCollection::current_position() const {
    std::lock_guard lock(store_->mu);
    return "mem." + std::to_string(store_->last_seq);
}

std::map<std::string, boost::json::value> InMemoryCollection::projection(const std::string& name) const {
    std::lock_guard lock(store_->mu);
    auto it = store_->projections.find(name);
    if (it == store_->projections.end()) return {};
    return it->second;
}

namespace {

// Under mu: the last seq a position has seen (a paged window: up to what it delivered).
std::int64_t seen_by(const detail::MemoryStore& s, const std::string& text) {
    const auto p = detail::parse_position(text);
    const std::int64_t seen = p.hi ? p.after : p.lo;
    if (seen > s.last_seq)
        throw Error(errc::position_ahead, "position " + text + " lies beyond this collection's last write");
    if (seen < s.last_seq && (!s.recording || seen < s.recorded_after))
        throw Error(errc::history_lost, "the collection does not hold the writes after position " + text +
                                            " (it records them from the first processor's start on, or from its "
                                            "construction with InMemoryOptions::record_from_start)");
    return seen;
}

// One document's changes in an interval of the log.
struct DocumentChanges {
    const detail::Entry* first = nullptr;
    const detail::Entry* last = nullptr;
    std::vector<std::string> event_ids;
};

// Under mu: per document changed in (after, upto], its changes.
std::map<std::string, DocumentChanges> changed_between(const detail::MemoryStore& s, std::int64_t after,
                                                       std::int64_t upto) {
    std::map<std::string, DocumentChanges> out;
    for (const auto& e : s.log) {
        if (e.seq <= after || e.seq > upto) continue;
        if (e.op == Operation::clear)
            throw Error(errc::cannot_rebuild, "cannot rebuild the collection at the position: a clear() after it");
        auto& d = out[e.doc_id];
        if (!d.first) {
            if (e.op != Operation::create && e.previous.is_null())
                throw Error(errc::cannot_rebuild, "cannot rebuild the collection at the position: a change after "
                                                  "it without the image before it (keep_previous off)");
            d.first = &e;
        }
        d.last = &e;
        d.event_ids.push_back("mem." + std::to_string(e.seq));
    }
    return out;
}

Document document_of(const std::string& id, const boost::json::value& doc) {
    return Document{id, doc, boost::json::serialize(doc)};
}

}  // namespace

std::vector<Document> as_of(const InMemoryCollection& collection, const std::string& position) {
    const auto& s = *collection.store_;
    std::lock_guard lock(s.mu);
    const auto changed = changed_between(s, seen_by(s, position), s.last_seq);
    std::vector<Document> out;
    for (const auto& [id, doc] : s.docs)
        if (!changed.count(id)) out.push_back(document_of(id, doc));
    for (const auto& [id, d] : changed)
        if (d.first->op != Operation::create) out.push_back(document_of(id, d.first->previous));
    return out;
}

std::vector<NetChange> diff(const InMemoryCollection& collection, const std::string& since, const std::string& upto) {
    const auto& s = *collection.store_;
    std::lock_guard lock(s.mu);
    const auto from = seen_by(s, since), to = seen_by(s, upto);
    if (to < from) throw Error(errc::invalid_option, "the second position is before the first");
    std::vector<NetChange> out;
    for (auto& [id, d] : changed_between(s, from, to)) {
        NetChange n;
        n.doc_id = id;
        if (d.first->op != Operation::create) n.previous = d.first->previous;
        if (d.last->op != Operation::delete_) n.current = d.last->current;
        if (n.previous == n.current) continue;
        n.operation = n.previous.is_null()  ? Operation::create
                      : n.current.is_null() ? Operation::delete_
                                            : Operation::replace;
        if (!n.current.is_null()) n.current_json = boost::json::serialize(n.current);
        if (!n.previous.is_null()) n.previous_json = boost::json::serialize(n.previous);
        n.event_ids = std::move(d.event_ids);
        out.push_back(std::move(n));
    }
    return out;
}

void wait_for(const InMemoryCollection& collection, const std::string& processor, const std::string& position,
              std::chrono::milliseconds timeout) {
    detail::check_processor_name(processor, processor);
    detail::wait_for_name(*collection.store_, processor, position, timeout);
}

Processor make_processor(InMemoryCollection& collection, std::string name, ProcessorHandler handler,
                         FeedOptions options) {
    return detail::processor_of(std::make_unique<detail::MemoryProcessor>(
        collection.store_, std::move(name), std::move(handler), detail::FeedSettings::of(options)));
}

}  // namespace changefeed
