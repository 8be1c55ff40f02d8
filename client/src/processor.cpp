// The processor: three threads, each with its own connection.
//   lease thread   acquires, balances and renews the leases; releases them on stop
//   worker thread  reads the owned ranges, calls the handler, checkpoints
//   listener       LISTENs and wakes the worker (the poll interval covers lost wake-ups)
// A connection error in any of them is answered by reconnecting with backoff;
// the worker then reloads its ranges from the stored checkpoints (resuming).
#include <changefeed/processor.hpp>

#include "db.hpp"
#include "feed_reader.hpp"
#include "lease_store.hpp"
#include "listener.hpp"
#include "processor_impl.hpp"
#include "runbook.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace changefeed {
namespace {

using Clock = std::chrono::steady_clock;

std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
    return buf;
}

// What the worker keeps per owned range.
struct RangeState {
    detail::RangeLease lease;
    std::string persisted;  // the checkpoint as stored
    Clock::time_point last_persist;
    Clock::time_point retry_at;
    std::int64_t estimated = -1;
    bool lost = false;
};

}  // namespace

struct PgProcessor final : Processor::Impl {
    Collection collection;
    std::string name;
    Handler handler;
    ProcessorOptions opt;
    FeedMode mode;
    std::string instance;
    std::string stored_name;  // the name on the server: with the tenant prefix, if any
    detail::LeaseKey key;
    detail::TenantScope scope;  // set by start() from the collection

    std::mutex start_mu;  // serializes start() and stop()
    bool started = false;

    mutable std::mutex mu;  // guards what follows, up to the threads
    std::condition_variable cv;
    std::map<int, std::int64_t> owned;  // range -> epoch, as the lease thread last saw
    Clock::time_point leases_valid_until{};
    bool acquired_once = false;
    bool wake = false;
    bool stopping = false;
    bool worker_done = false;

    std::atomic<State> state{State::stopped};
    std::stop_source stop_source;
    CollectionInfo info;
    std::unique_ptr<detail::Listener> listener;
    std::thread lease_thread, worker_thread;
    // Worker thread only: ranges halted by history lost (kept across
    // reconnects, cleared by start()), and when maintain() runs next.
    std::set<int> halted;
    Clock::time_point next_maintain{};
    bool maintain_denied_told = false;

    PgProcessor(Collection c, std::string n, Handler h, ProcessorOptions o, FeedMode m)
        : collection(std::move(c)), name(std::move(n)), handler(std::move(h)), opt(std::move(o)), mode(m) {
        stored_name = stored_processor_name(name, opt.tenant);
        detail::check_processor_name(name, stored_name);
        if (mode == FeedMode::all_versions_and_deletes && opt.start_from_beginning)
            throw Error(errc::start_from_beginning_not_supported,
                        "start_from_beginning is refused on the all-versions feed: "
                        "previous versions and deletes exist only inside the retention window");
        if (!handler) throw Error(errc::invalid_option, "the handler must not be empty");
        if (opt.resync && mode == FeedMode::all_versions_and_deletes)
            throw Error(errc::invalid_option,
                        "resync is refused on the all-versions feed: the lost versions cannot be re-read");
        instance = opt.instance_name.empty() ? host_name() : opt.instance_name;
        detail::check_instance_name(instance);
        using std::chrono::milliseconds;
        if (opt.lease_duration <= milliseconds(0) || opt.renew_interval <= milliseconds(0) ||
            opt.acquire_interval <= milliseconds(0) || opt.poll_interval <= milliseconds(0) ||
            opt.retry_delay < milliseconds(0) || opt.reconnect_min <= milliseconds(0) ||
            opt.reconnect_max < opt.reconnect_min || opt.maintain_interval < milliseconds(0))
            throw Error(errc::invalid_option, "intervals must be positive");
        if (opt.renew_interval >= opt.lease_duration)
            throw Error(errc::invalid_option, "renew_interval must be shorter than lease_duration");
        if (opt.max_batch_size < 1 || opt.max_batch_size > 100000)
            throw Error(errc::invalid_option, "max_batch_size must be between 1 and 100000");
        key = {collection.table(), stored_name, instance};
    }

    ~PgProcessor() override { stop(); }

    void set_state(State s) {
        State old = state.exchange(s);
        if (old != s && opt.on_state_change) {
            try { opt.on_state_change(s); } catch (...) {}
        }
    }

    void report(std::optional<int> range, const Error& e, std::exception_ptr p) {
        if (!opt.on_error) return;
        try {
            opt.on_error(ErrorInfo{range, e.code(), e.what(), p ? p : std::make_exception_ptr(e)});
        } catch (...) {
        }
    }

    void wake_up() {
        {
            std::lock_guard lock(mu);
            wake = true;
        }
        cv.notify_all();
    }

    // Sleeps up to `d`, returning early when stopping.
    void pause(std::chrono::milliseconds d) {
        std::unique_lock lock(mu);
        cv.wait_for(lock, d, [&] { return stopping; });
    }

    void start() override {
        std::lock_guard guard(start_mu);
        if (started) throw Error(errc::already_started, "processor \"" + name + "\" is already started");
        set_state(State::starting);
        std::unique_ptr<pqxx::connection> conn;
        try {
            info = collection.describe();
            if (!opt.tenant.empty() && !info.tenant_column)
                throw Error(errc::invalid_option, "the tenant option needs a collection with a tenant column; " +
                                                      collection.table() + " has none (changefeed.enable(..., tenant_column => ...))");
            scope = {};
            if (!opt.tenant.empty()) {
                scope.tenant = opt.tenant;
                scope.tenant_column = *info.tenant_column;
                scope.strip_partition_prefix = info.partition_key.size() > 1 && info.partition_key[0] == *info.tenant_column;
            }
            conn = detail::connect(collection.conninfo());
            // Refused reads fail here, before lease_init files the name under this role.
            detail::probe_read(*conn, collection.table(), opt.tenant);
            detail::translated([&] {
                pqxx::nontransaction tx(*conn);
                tx.exec("SELECT changefeed.ensure_notifier()");
            });
            detail::init_leases(*conn, key, opt.start_from_beginning && mode == FeedMode::latest_version);
        } catch (...) {
            set_state(State::stopped);
            throw detail::to_error(std::current_exception());
        }
        {
            std::lock_guard lock(mu);
            owned.clear();
            acquired_once = false;
            wake = true;
            stopping = false;
            worker_done = false;
        }
        halted.clear();
        next_maintain = Clock::now();
        maintain_denied_told = false;
        stop_source = std::stop_source();
        listener = std::make_unique<detail::Listener>(
            collection.conninfo(), info.channel, [this] { wake_up(); }, opt.reconnect_min, opt.reconnect_max);
        listener->start();
        lease_thread = std::thread([this, c = std::move(conn)]() mutable { lease_loop(std::move(c)); });
        worker_thread = std::thread([this] { worker_loop(); });
        started = true;
    }

    void stop() override {
        if (std::this_thread::get_id() == worker_thread.get_id()) {
            // Called from the handler: joining ourselves would deadlock, so only
            // ask; the destructor (or a later stop()) finishes the job.
            {
                std::lock_guard lock(mu);
                stopping = true;
            }
            stop_source.request_stop();
            cv.notify_all();
            return;
        }
        std::lock_guard guard(start_mu);
        if (!started) return;
        {
            std::lock_guard lock(mu);
            stopping = true;
        }
        stop_source.request_stop();
        cv.notify_all();
        worker_thread.join();
        // Only now release the leases: the worker's last checkpoint is stored.
        {
            std::lock_guard lock(mu);
            worker_done = true;
        }
        cv.notify_all();
        lease_thread.join();
        listener->stop();
        listener.reset();
        started = false;
        {
            std::lock_guard lock(mu);
            owned.clear();
        }
        if (state != State::history_lost) set_state(State::stopped);
    }

    // ---- lease thread ----------------------------------------------------

    void lease_loop(std::unique_ptr<pqxx::connection> conn) {
        auto next_acquire = Clock::now();
        auto next_renew = Clock::now();
        auto backoff = opt.reconnect_min;
        for (;;) {
            {
                std::lock_guard lock(mu);
                if (stopping) break;
            }
            try {
                if (!conn) conn = detail::connect(collection.conninfo());
                auto now = Clock::now();
                if (now >= next_acquire) {
                    auto got = detail::acquire_leases(*conn, key, opt.lease_duration);
                    publish(std::move(got), std::nullopt);
                    next_acquire = now + opt.acquire_interval;
                }
                now = Clock::now();
                if (now >= next_renew) {
                    auto got = detail::renew_leases(*conn, key, opt.lease_duration);
                    // Valid from when the renewal was sent, not when it answered.
                    publish(std::move(got), now + opt.lease_duration);
                    next_renew = now + opt.renew_interval;
                }
                backoff = opt.reconnect_min;
            } catch (...) {
                Error e = detail::to_error(std::current_exception());
                if (e.code() == make_error_code(errc::collection_not_found) ||
                    e.code() == make_error_code(errc::collection_not_enabled)) {
                    // Dropped or disabled while running: halt, as the worker does.
                    report(std::nullopt, e, std::current_exception());
                    {
                        std::lock_guard lock(mu);
                        stopping = true;
                    }
                    stop_source.request_stop();
                    cv.notify_all();
                    set_state(State::stopped);
                    break;
                }
                if (!detail::is_connection_error(e)) report(std::nullopt, e, std::current_exception());
                conn.reset();
                pause(backoff);
                backoff = std::min(backoff * 2, opt.reconnect_max);
                continue;
            }
            std::unique_lock lock(mu);
            cv.wait_until(lock, std::min(next_acquire, next_renew), [&] { return stopping; });
        }
        // Keep the leases until the worker is done, then release them so that
        // another instance takes over without waiting for the expiry.
        {
            std::unique_lock lock(mu);
            while (!worker_done) {
                lock.unlock();
                try {
                    if (!conn) conn = detail::connect(collection.conninfo());
                    auto got = detail::renew_leases(*conn, key, opt.lease_duration);
                    (void)got;
                } catch (...) {
                    conn.reset();
                }
                lock.lock();
                cv.wait_for(lock, opt.renew_interval, [&] { return worker_done; });
            }
        }
        for (int attempt = 0; attempt < 3; ++attempt) {
            try {
                if (!conn) conn = detail::connect(collection.conninfo());
                detail::release_leases(*conn, key);
                return;
            } catch (...) {
                conn.reset();  // the leases expire on their own if the server stays away
            }
        }
    }

    void publish(std::map<int, std::int64_t> got, std::optional<Clock::time_point> valid_until) {
        {
            std::lock_guard lock(mu);
            if (got != owned) wake = true;
            owned = std::move(got);
            if (valid_until) leases_valid_until = *valid_until;
            acquired_once = true;
        }
        cv.notify_all();
    }

    // ---- worker thread ---------------------------------------------------

    void worker_loop() {
        std::unique_ptr<pqxx::connection> conn;
        std::map<int, RangeState> ranges;
        auto backoff = opt.reconnect_min;
        while (!stop_source.stop_requested()) {
            try {
                if (!conn) {
                    conn = detail::connect(collection.conninfo());
                    ranges.clear();  // reload every range from its stored checkpoint
                }
                std::map<int, std::int64_t> owned_now;
                Clock::time_point valid_until;
                bool ready;
                {
                    std::lock_guard lock(mu);
                    owned_now = owned;
                    valid_until = leases_valid_until;
                    ready = acquired_once;
                }
                sync_ranges(*conn, ranges, owned_now);
                if (ready && halted.empty()) set_state(State::running);
                maybe_maintain(*conn);
                backoff = opt.reconnect_min;

                bool busy = false;
                auto next_retry = Clock::time_point::max();
                if (Clock::now() < valid_until) {
                    // Ranges at one position are read together: after a catch-up
                    // they all share the last read's position, so a wake-up costs
                    // one read, not one per range.
                    std::map<std::string, std::vector<int>> groups;
                    for (auto& [range, st] : ranges) {
                        if (halted.count(range)) continue;
                        if (Clock::now() < st.retry_at) {
                            next_retry = std::min(next_retry, st.retry_at);
                            continue;
                        }
                        if (!st.lease.backfill_done)
                            groups["\n" + std::to_string(range)].push_back(range);  // alone
                        else
                            groups[st.lease.checkpoint].push_back(range);
                    }
                    for (auto& [position, group] : groups) {
                        if (stop_source.stop_requested()) break;
                        busy |= group.size() == 1 ? step(*conn, group[0], ranges.at(group[0]))
                                                  : group_step(*conn, position, group, ranges);
                    }
                }
                drop_lost(ranges);
                if (!busy) {
                    std::unique_lock lock(mu);
                    auto until = std::min(Clock::now() + opt.poll_interval, next_retry);
                    cv.wait_until(lock, until, [&] { return wake || stopping; });
                    wake = false;
                }
            } catch (...) {
                Error e = detail::to_error(std::current_exception());
                if (e.code() == make_error_code(errc::collection_not_found) ||
                    e.code() == make_error_code(errc::collection_not_enabled)) {
                    // The table was dropped or disabled: nothing to resume (seed 003's invalidate).
                    report(std::nullopt, e, std::current_exception());
                    set_state(State::stopped);
                    return;
                }
                if (detail::is_connection_error(e)) {
                    set_state(State::resuming);
                } else {
                    report(std::nullopt, e, std::current_exception());
                }
                conn.reset();
                pause(backoff);
                backoff = std::min(backoff * 2, opt.reconnect_max);
            }
        }
        // Store where idle ranges got to, so the next owner does not re-read
        // empty windows.  Best effort: the stored checkpoints are valid anyway.
        if (!conn) return;
        for (auto& [range, st] : ranges) {
            if (st.lost || st.lease.checkpoint == st.persisted) continue;
            try {
                detail::checkpoint(*conn, key, range, st.lease.epoch, st.lease.checkpoint);
            } catch (...) {
                return;
            }
        }
    }

    // Follows the lease thread's view: forget ranges lost or re-acquired at a
    // new epoch, load new ones from their stored state.
    void sync_ranges(pqxx::connection& conn, std::map<int, RangeState>& ranges,
                     const std::map<int, std::int64_t>& owned_now) {
        for (auto it = ranges.begin(); it != ranges.end();) {
            auto o = owned_now.find(it->first);
            if (o == owned_now.end() || o->second != it->second.lease.epoch)
                it = ranges.erase(it);
            else
                ++it;
        }
        bool missing = false;
        for (const auto& [range, epoch] : owned_now)
            if (!ranges.count(range)) missing = true;
        if (!missing) return;
        auto stored = detail::load_leases(conn, key);
        for (const auto& [range, epoch] : owned_now) {
            if (ranges.count(range)) continue;
            auto s = stored.find(range);
            if (s == stored.end() || s->second.epoch != epoch) continue;  // changed hands meanwhile
            RangeState st;
            st.lease = s->second;
            st.persisted = st.lease.checkpoint;
            st.last_persist = Clock::now();
            ranges.emplace(range, std::move(st));
        }
    }

    // changefeed.maintain() now and then; its failures never stop reading.
    void maybe_maintain(pqxx::connection& conn) {
        if (opt.maintain_interval <= std::chrono::milliseconds(0) || Clock::now() < next_maintain) return;
        next_maintain = Clock::now() + opt.maintain_interval;
        try {
            detail::translated([&] {
                pqxx::nontransaction tx(conn);
                tx.exec("SELECT changefeed.maintain()");
            });
        } catch (const Error& e) {
            if (detail::is_connection_error(e)) throw;
            // A role without the right to maintain: the worker or cron does it; say so once.
            if (e.code() == make_error_code(errc::permission_denied)) {
                if (maintain_denied_told) return;
                maintain_denied_told = true;
            }
            report(std::nullopt, e, std::current_exception());
        }
    }

    // A checkpoint the feed cannot resume from: history lost (CF006), or a
    // position of another database or cluster (CF005: a restored database)
    // or damaged (CF004: a checkpoint from before an upgrade).  Each is a lost
    // history for this range, never a restart from now.
    static bool unusable_checkpoint(const Error& e) {
        return e.code() == make_error_code(errc::history_lost) ||
               e.code() == make_error_code(errc::foreign_position) ||
               e.code() == make_error_code(errc::malformed_position);
    }

    static detail::LostBecause lost_because(const Error& e) {
        if (e.code() == make_error_code(errc::foreign_position)) return detail::LostBecause::other_database;
        if (e.code() == make_error_code(errc::malformed_position)) return detail::LostBecause::invalid_position;
        return detail::LostBecause::retention;
    }

    // An unusable checkpoint on a range: resync it from the table when asked
    // to, else halt it.  Never a restart from "now".  Returns whether there was work.
    bool history_lost(pqxx::connection& conn, const Context& ctx, RangeState& st, const Error& e) {
        const int range = ctx.range_id;
        if (opt.resync && mode == FeedMode::latest_version) {
            std::string pos;
            if (!fenced(range, st, [&] { pos = detail::resync(conn, key, range, st.lease.epoch); })) return false;
            st.lease.checkpoint = st.persisted = pos;
            st.lease.backfill_done = false;
            st.lease.backfill_after.reset();
            st.lease.backfill_rows = 0;
            st.estimated = -1;
            st.last_persist = Clock::now();
            report(range,
                   Error(errc::history_lost,
                         "history lost on range " + std::to_string(range) + " of processor \"" + name +
                             "\"; resync: re-reading the range's current rows from " + collection.table() +
                             ", then continuing from the log. Server: " + e.what(),
                         e.sqlstate()),
                   std::make_exception_ptr(e));
            return true;
        }
        halted.insert(range);
        set_state(State::history_lost);
        report(range,
               Error(errc::history_lost,
                     detail::history_lost_runbook(collection.table(), stored_name, range,
                                                  mode == FeedMode::latest_version, lost_because(e), e.what()),
                     e.sqlstate()),
               std::make_exception_ptr(e));
        return false;
    }

    void drop_lost(std::map<int, RangeState>& ranges) {
        std::lock_guard lock(mu);
        for (auto it = ranges.begin(); it != ranges.end();) {
            if (it->second.lost) {
                auto o = owned.find(it->first);
                if (o != owned.end() && o->second == it->second.lease.epoch) owned.erase(o);
                it = ranges.erase(it);
            } else {
                ++it;
            }
        }
    }

    bool call_handler(const std::vector<Change>& batch, const Context& ctx, RangeState& st) {
        try {
            handler(batch, ctx, stop_source.get_token());
            return true;
        } catch (...) {
            std::string what = "handler failed";
            try {
                throw;
            } catch (const std::exception& e) {
                what = std::string("handler failed: ") + e.what();
            } catch (...) {
            }
            report(ctx.range_id, Error(errc::handler_failed, what), std::current_exception());
            st.retry_at = Clock::now() + opt.retry_delay;
            return false;
        }
    }

    // Runs a fenced checkpoint; a lost lease marks the range for dropping.
    template <class F>
    bool fenced(int range, RangeState& st, F&& store) {
        try {
            store();
            return true;
        } catch (const Error& e) {
            if (e.code() != make_error_code(errc::lease_lost)) throw;
            report(range, e, std::current_exception());
            st.lost = true;
            return false;
        }
    }

    // One read (or backfill page) of one range; true if there was work.
    bool step(pqxx::connection& conn, int range, RangeState& st) {
        Context ctx{range, name, instance, st.lease.epoch, std::to_string(range)};
        const int batch = opt.max_batch_size;
        if (!st.lease.backfill_done) return backfill_step(conn, ctx, st);

        detail::ReadResult rr;
        try {
            rr = detail::read_range(conn, collection.table(), st.lease.checkpoint, batch, range, mode, scope);
        } catch (const Error& e) {
            if (!unusable_checkpoint(e)) throw;
            return history_lost(conn, ctx, st, e);
        }
        if (rr.changes.empty()) {
            advance_idle(conn, range, st, rr.position);
            return false;
        }
        if (stop_source.stop_requested()) return false;
        return deliver(conn, ctx, st, rr.changes, rr.position);
    }

    // Ranges sharing `since`, in one read.  The read's position is valid for
    // each of them: rows come in seq order across the ranges, so a range with
    // no rows up to the last one returned had none before it.
    bool group_step(pqxx::connection& conn, const std::string& since, const std::vector<int>& group,
                    std::map<int, RangeState>& ranges) {
        detail::ReadResult rr;
        try {
            rr = detail::read_ranges(conn, collection.table(), since, opt.max_batch_size, group, mode, scope);
        } catch (const Error& e) {
            if (!unusable_checkpoint(e)) throw;
            bool any = false;  // history loss is handled range by range
            for (int range : group) any |= step(conn, range, ranges.at(range));
            return any;
        }
        std::map<int, std::vector<Change>> by_range;
        for (auto& c : rr.changes) by_range[c.range_id].push_back(std::move(c));
        bool busy = false;
        for (int range : group) {
            RangeState& st = ranges.at(range);
            auto it = by_range.find(range);
            if (it == by_range.end()) {
                advance_idle(conn, range, st, rr.position);
                continue;
            }
            if (stop_source.stop_requested()) break;
            Context ctx{range, name, instance, st.lease.epoch, std::to_string(range)};
            busy |= deliver(conn, ctx, st, it->second, rr.position);
        }
        return busy;
    }

    // Hands a batch to the handler; checkpoints `position` after it returned.
    bool deliver(pqxx::connection& conn, const Context& ctx, RangeState& st, const std::vector<Change>& batch,
                 const std::string& position) {
        if (!call_handler(batch, ctx, st)) return false;
        const int range = ctx.range_id;
        if (fenced(range, st, [&] { detail::checkpoint(conn, key, range, st.lease.epoch, position); })) {
            st.lease.checkpoint = st.persisted = position;
            st.last_persist = Clock::now();
        }
        return true;
    }

    // Nothing to deliver: move on, and store the advancing position now and
    // then rather than on every poll.
    void advance_idle(pqxx::connection& conn, int range, RangeState& st, const std::string& position) {
        st.lease.checkpoint = position;
        if (position != st.persisted && Clock::now() - st.last_persist >= opt.idle_checkpoint_interval) {
            if (fenced(range, st, [&] { detail::checkpoint(conn, key, range, st.lease.epoch, position); })) {
                st.persisted = position;
                st.last_persist = Clock::now();
            }
        }
    }

    bool backfill_step(pqxx::connection& conn, const Context& ctx, RangeState& st) {
        const int range = ctx.range_id;
        if (st.estimated < 0)
            st.estimated = detail::estimated_rows(conn, collection.table()) / std::max(1, info.ranges);
        auto page = detail::backfill_page(conn, collection.table(), range, st.lease.backfill_after,
                                          opt.max_batch_size, scope);
        const bool done = page.scanned < opt.max_batch_size;
        if (!page.changes.empty()) {
            if (stop_source.stop_requested()) return false;
            if (!call_handler(page.changes, ctx, st)) return false;
        }
        auto after = page.last_key ? page.last_key : st.lease.backfill_after;
        auto rows = st.lease.backfill_rows + static_cast<std::int64_t>(page.changes.size());
        if (!fenced(range, st, [&] {
                detail::checkpoint_backfill(conn, key, range, st.lease.epoch, after, rows, done);
            }))
            return false;
        st.lease.backfill_after = after;
        st.lease.backfill_rows = rows;
        st.lease.backfill_done = done;
        if (opt.on_backfill_progress) {
            try {
                opt.on_backfill_progress(
                    BackfillProgress{range, rows, std::max(st.estimated, rows), done});
            } catch (...) {
            }
        }
        return true;
    }

    State current_state() const override { return state; }
    const std::string& processor_name() const override { return name; }
    const std::string& instance_name() const override { return instance; }
    std::vector<int> owned_ranges() const override {
        std::lock_guard lock(mu);
        std::vector<int> out;
        for (const auto& [range, epoch] : owned) out.push_back(range);
        return out;
    }
};

std::string stored_processor_name(const std::string& name, const std::string& tenant) {
    if (tenant.empty()) return name;
    std::string out;
    for (char ch : tenant) {
        if (ch == '%') out += "%25";
        else if (ch == '/') out += "%2F";
        else out += ch;
    }
    return out + "/" + name;
}

Processor::Processor(Collection collection, std::string name, Handler handler, ProcessorOptions options,
                     FeedMode mode)
    : impl_(std::make_unique<PgProcessor>(std::move(collection), std::move(name), std::move(handler),
                                          std::move(options), mode)) {}

Processor::Processor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Processor::~Processor() = default;
Processor::Processor(Processor&&) noexcept = default;
Processor& Processor::operator=(Processor&&) noexcept = default;

void Processor::start() { impl_->start(); }
void Processor::stop() {
    if (impl_) impl_->stop();
}
State Processor::state() const { return impl_->current_state(); }
const std::string& Processor::name() const { return impl_->processor_name(); }
const std::string& Processor::instance_name() const { return impl_->instance_name(); }
std::vector<int> Processor::owned_ranges() const { return impl_->owned_ranges(); }

Processor make_latest_version_processor(Collection collection, std::string name, Handler handler,
                                        ProcessorOptions options) {
    return Processor(std::move(collection), std::move(name), std::move(handler), std::move(options),
                     FeedMode::latest_version);
}

Processor make_all_versions_processor(Collection collection, std::string name, Handler handler,
                                      ProcessorOptions options) {
    return Processor(std::move(collection), std::move(name), std::move(handler), std::move(options),
                     FeedMode::all_versions_and_deletes);
}

}  // namespace changefeed
