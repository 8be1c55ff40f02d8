#include "deliver/range_worker.hpp"

#include "core/db.hpp"
#include "core/raise_flag.hpp"
#include "observe/runbook.hpp"
#include "supervise/supervised_loop.hpp"

#include <algorithm>
#include <utility>

namespace changefeed::detail {
namespace {

// A checkpoint the feed cannot resume from: history lost (CF006, CF019), or a
// position of another database or cluster (CF005: a restored database), of
// a history this server did not follow (CF017) or damaged (CF004: a
// checkpoint from before an upgrade), or versions no longer logged (CF021:
// the collection was switched to keys alone under an all-versions feed).
// Each is a lost history for this range, never a restart from now.
bool unusable_checkpoint(const Error& e) {
    return e.code() == make_error_code(errc::history_lost) || e.code() == make_error_code(errc::foreign_position) ||
           e.code() == make_error_code(errc::malformed_position) || e.code() == make_error_code(errc::other_history) ||
           e.code() == make_error_code(errc::images_not_logged);
}

LostBecause lost_because(const Error& e) {
    if (e.code() == make_error_code(errc::foreign_position)) return LostBecause::other_database;
    if (e.code() == make_error_code(errc::other_history)) return LostBecause::other_history;
    if (e.code() == make_error_code(errc::malformed_position)) return LostBecause::invalid_position;
    if (e.code() == make_error_code(errc::images_not_logged)) return LostBecause::keys_only;
    if (has_condition(e, ServerCondition::capture_was_off)) return LostBecause::capture_disabled;
    return LostBecause::retention;
}

// A read from a standby that can succeed later: it has not replayed the
// position yet (CF016), or a replay conflict cancelled it (40001).
bool standby_behind(const Error& e) {
    return e.code() == make_error_code(errc::position_not_replayed) ||
           has_condition(e, ServerCondition::replay_conflict);
}

// A read of a range the collection no longer has (CF020 from read_ranges()
// or read()): its number of ranges changed under this instance.
bool ranges_changed(const Error& e) { return has_condition(e, ServerCondition::ranges_changed); }

}  // namespace

RangeWorker::RangeWorker(WorkerSetup setup, ConsumerEvents& events, LeaseKeeper& leases)
    : s_(std::move(setup)), opt_(s_.feed->common), events_(events), leases_(leases),
      delivery_(s_.collection.conninfo(), s_.key, *s_.handler, opt_, events, s_.counters, s_.feed->before_checkpoint),
      read_ahead_(opt_.read_connection.empty() ? s_.collection.conninfo() : opt_.read_connection) {
    next_maintain_ = Clock::now();
}

void RangeWorker::wake() { raise_flag(mu_, cv_, wake_); }

void RangeWorker::leases_changed() {
    {
        std::lock_guard lock(mu_);
        leases_moved_ = true;  // a long poll about to start reads at once instead
    }
    wake();
    interrupt_long_poll();
}

void RangeWorker::request_stop() {
    raise_flag(mu_, cv_, stopping_);
    stop_source_.request_stop();  // a handler watching its Context::stop returns early
    interrupt_long_poll();
}

// Cancels the long poll waiting now, if any.
void RangeWorker::interrupt_long_poll() {
    std::lock_guard lock(mu_);
    if (polling_ == nullptr) return;
    try {
        polling_->cancel_query();
    } catch (...) {
    }
}

// How long the next read of a caught-up worker may wait in the server: up to
// the poll interval, well within the leases' validity; zero for no long poll
// (reading a standby, a server without it, leases about to lapse).
std::chrono::milliseconds RangeWorker::long_poll_wait() const {
    using std::chrono::milliseconds;
    if (!opt_.long_poll || reads_standby() || long_poll_ == 0) return milliseconds(0);
    const auto valid = std::chrono::duration_cast<milliseconds>(view_.valid_until - Clock::now()) / 2;
    const milliseconds wait = std::min({opt_.poll_interval, valid, milliseconds(30000)});
    return wait >= milliseconds(100) ? wait : milliseconds(0);
}

// Whether the worker is caught up on ranges it reads from the log, none of
// them waiting for a retry: what a long poll is for.
bool RangeWorker::long_poll_worth() const {
    const ReadPlan p = plan();
    return !p.log.empty() && p.backfilling.empty() && p.next_retry == Clock::time_point::max();
}

// The long poll: what a read that waited up to `wait` for a commit read, or
// nothing when it could not (then read as usual) or was interrupted (stop, a
// change of leases: then a result of no rows, nothing read).
std::optional<MultiReadResult> RangeWorker::long_poll(pqxx::connection& conn, const std::map<int, std::string>& since,
                                                      int budget, std::chrono::milliseconds wait) {
    try {
        if (long_poll_ < 0) long_poll_ = long_poll_available(conn) ? 1 : 0;
        if (long_poll_ == 0) {
            listen_instead();
            return std::nullopt;
        }
        {
            std::lock_guard lock(mu_);
            if (stopping_ || std::exchange(leases_moved_, false)) return MultiReadResult();  // read at once instead
            polling_ = &conn;
        }
        // A cancel is sent under mu_: once polling_ is cleared, none is on
        // its way to the statements that follow on this connection (and one
        // that reaches the session between statements is ignored).
        auto clear = [this] {
            std::lock_guard lock(mu_);
            polling_ = nullptr;
        };
        try {
            MultiReadResult r = fetch_positions(conn, s_.collection.table(), since, budget, opt_.max_batch_size,
                                                s_.feed->mode, s_.scope, wait);
            clear();
            return r;
        } catch (...) {
            clear();
            throw;
        }
    } catch (const Error& e) {
        if (has_condition(e, ServerCondition::query_cancelled)) return MultiReadResult();  // interrupted
        if (has_condition(e, ServerCondition::long_poll_unavailable)) {
            long_poll_ = 0;  // not here: LISTEN/NOTIFY and polling
            listen_instead();
            return std::nullopt;
        }
        throw;
    }
}

// The long poll is not available: the processor LISTENs for wake-ups instead.
void RangeWorker::listen_instead() {
    if (listening_ || !s_.listen) return;
    listening_ = true;
    s_.listen();
}

// Sleeps up to `d`, returning early when stopping.
void RangeWorker::pause(std::chrono::milliseconds d) {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, d, [&] { return stopping_; });
}

Context RangeWorker::context_of(int range, const RangeState& st) const {
    return Context{range, s_.name, s_.instance, st.lease.epoch, std::to_string(range), {}, {}, {}};
}

void RangeWorker::run() {
    std::unique_ptr<pqxx::connection> conn;
    std::unique_ptr<pqxx::connection> reader;  // the standby's, with read_connection
    // Reading a standby, the wake-up (from the primary's notifier) can come
    // before the standby replayed the commit: empty reads after a wake-up are
    // tried again at 2, 4, ... 256 ms (about half a second in all) before
    // waiting for the next wake-up or the poll interval.
    constexpr int replay_checks_after_wake = 8;
    int replay_checks = 0;
    SupervisedLoop loop(opt_.reconnect_min, opt_.reconnect_max, [this](std::chrono::milliseconds d) {
        pause(d);
        return stop_source_.stop_requested();
    });
    bool halted = false;
    auto round = [&] {
        if (!conn) {
            conn = connect(s_.collection.conninfo());
            // Through a multi-host string the reconnect may land on a
            // standby (no target_session_attrs=read-write): say so, and
            // try again, as after a lost connection.
            require_primary(*conn);
            events_.telemetry().connected(ConnectionRole::worker);
            // Reload every range from its stored checkpoint: after a
            // failover that is what the new primary has, not what this
            // instance had read (or read ahead) on the old one.  The
            // checkpoints handed to the lease thread are stored first
            // (bounded: it may be cut off too; then some are read again).
            (void)leases_.flush_checkpoints(opt_.lease_duration);
            (void)leases_.checkpoint_outcome();
            ranges_.clear();
            read_ahead_.drop();
            long_poll_ = -1;  // asked again: the server may be another one now
            // What a projector applied before the connection broke is
            // recorded before anything is read again, so the re-read skips it.
            delivery_.flush_unrecorded(*conn);
        }
        if (reads_standby() && !reader) reader = connect(opt_.read_connection);
        const bool busy = pass(*conn, reader ? *reader : *conn);
        loop.succeeded();
        if (const auto wait = long_poll_wait(); wait.count() > 0 && long_poll_worth()) {
            // Every read of the log may wait in the server for a commit
            // and return it in the same round trip (one that finds
            // changes returns at once): notifications are not needed.
            std::lock_guard lock(mu_);
            wait_next_ = wait;
            wake_ = false;
        } else if (busy) {
            replay_checks = 0;
        } else if (replay_checks > 0) {
            // Woken by the primary, found nothing on the standby: it may
            // not have replayed the commit yet.  Look again shortly.
            pause(std::chrono::milliseconds(2 << (replay_checks_after_wake - replay_checks--)));
        } else {
            wait_next_ = std::chrono::milliseconds(0);
            std::unique_lock lock(mu_);
            cv_.wait_until(lock, std::min(Clock::now() + opt_.poll_interval, plan().next_retry),
                           [&] { return wake_ || stopping_; });
            if (wake_ && reads_standby()) replay_checks = replay_checks_after_wake;
            wake_ = false;
        }
        return true;
    };
    auto failed = [&](const Error& e, std::exception_ptr p) {
        if (ranges_changed(e)) {
            // alter(ranges => n) moved the leases to new ranges: the lease
            // thread takes them now; they are read from their checkpoints.
            ranges_.clear();
            leases_.refresh();
            pause(opt_.retry_delay);
            return AfterFailure::retry;
        }
        if (const auto situation = processor_situation(e)) {
            const RecoveryDecision d = events_.decide(Incident{*situation, std::nullopt, e.code(), e.what(), 0});
            if (d.halts()) {
                // Halted: give the leases up now (another role's or gone with the table).
                events_.report_decided(std::nullopt, e, p, d);
                leases_.stop_acquiring();
                leases_.release();
                halted = true;
                return AfterFailure::stop;
            }
            if (*situation == Situation::connection_lost) {
                events_.telemetry().connection_lost(ConnectionRole::worker, e.what());
                events_.set_state(State::resuming);
            } else {
                events_.report(std::nullopt, e, p);
            }
        } else {
            events_.report(std::nullopt, e, p);
        }
        conn.reset();
        reader.reset();
        wait_next_ = std::chrono::milliseconds(0);
        read_ahead_.drop();
        return AfterFailure::back_off;
    };
    loop.run([this] { return stop_source_.stop_requested(); }, round, failed);
    read_ahead_.close();
    if (halted) return;  // the leases are given up: nothing to store
    // Stopping: what a projector applied and could not record yet is
    // recorded now if the server can be reached (best effort: else only a
    // later instance's re-read can apply it again).
    if (delivery_.has_unrecorded()) {
        try {
            if (!conn) conn = connect(s_.collection.conninfo());
            delivery_.flush_unrecorded(*conn);
        } catch (...) {
            conn.reset();
        }
    }
    store_idle_positions();
}

// One read of every readable range; whether any had work.
bool RangeWorker::pass(pqxx::connection& conn, pqxx::connection& reader) {
    take_checkpoint_outcome();
    leases_.refresh_view(view_);
    const LeaseView& view = view_;
    // The ranges follow the owned set only when it or they changed: an idle
    // pass looks at no range for this.
    if (view.version != synced_version_ || ranges_.size() != view.owned.size()) {
        sync_ranges(conn, view.owned);
        synced_version_ = ranges_.size() == view.owned.size() ? view.version : 0;
    }
    if (view.acquired_once && halted_.empty()) events_.set_state(State::running);
    maybe_maintain(conn);

    bool busy = false;
    if (Clock::now() < view.valid_until) {
        // All ranges reading the log in one read_ranges() call, whatever
        // their positions, and their checkpoints in one call after the
        // round: a wake-up costs two statements, not two per range.
        const ReadPlan p = plan();
        for (int range : p.backfilling) {
            if (stop_source_.stop_requested()) break;
            busy |= step(conn, range, ranges_.at(range));
        }
        if (!p.log.empty() && !stop_source_.stop_requested()) busy |= log_round(conn, reader, p.log);
    }
    drop_lost();
    return busy;
}

RangeWorker::ReadPlan RangeWorker::plan() const {
    ReadPlan p;
    const auto now = Clock::now();
    for (const auto& [range, st] : ranges_) {
        if (halted_.count(range)) continue;
        if (now < st.retry_at) {
            p.next_retry = std::min(p.next_retry, st.retry_at);
            continue;
        }
        if (!st.lease.backfill_done) p.backfilling.push_back(range);
        else p.log.push_back(range);
    }
    return p;
}

// Stores where idle ranges got to, so the next owner does not re-read empty
// windows.  Best effort: the stored checkpoints are valid anyway.  Not in
// manual mode, where only Context::checkpoint stores.
void RangeWorker::store_idle_positions() {
    if (!delivery_.automatic()) return;
    std::vector<PendingCheckpoint> pending;
    for (auto& [range, st] : ranges_) {
        if (st.lost || st.lease.checkpoint == st.persisted) continue;
        pending.push_back(PendingCheckpoint{range, st.lease.epoch, st.lease.checkpoint});
    }
    leases_.store_checkpoints(std::move(pending));  // stored before the leases are released
}

// Hands a round's checkpoints to the lease thread, which stores them in one call.
void RangeWorker::store_pending(const std::vector<PendingCheckpoint>& pending) {
    if (pending.empty()) return;
    if (s_.feed->before_checkpoint && !s_.feed->before_checkpoint(stop_source_.get_token())) {
        // What the handler handed over is not confirmed (stopping): store
        // nothing, and read these ranges from their stored checkpoints.
        for (const auto& m : pending) {
            auto it = ranges_.find(m.range);
            if (it != ranges_.end()) it->second.lease.checkpoint = it->second.persisted;
        }
        return;
    }
    // Stored by the lease thread while this one reads on; what became of
    // them is taken up at the next pass (take_checkpoint_outcome()).
    const auto now = Clock::now();
    for (const auto& m : pending) {
        auto it = ranges_.find(m.range);
        if (it != ranges_.end()) it->second.last_persist = now;
    }
    leases_.store_checkpoints(pending);
}

// The checkpoints the lease thread stored since the last pass: a range whose
// lease changed hands is reported and dropped, as after CF010 from a single
// checkpoint; one refused otherwise (reported) is read again from the
// stored checkpoints, as after a reconnect.
void RangeWorker::take_checkpoint_outcome() {
    LeaseKeeper::CheckpointOutcome outcome = leases_.checkpoint_outcome();
    if (outcome.failed) {
        ranges_.clear();
        read_ahead_.drop();
        return;
    }
    for (auto& m : outcome.stored) {
        auto it = ranges_.find(m.range);
        if (it != ranges_.end() && it->second.lease.epoch == m.epoch) it->second.persisted = std::move(m.position);
    }
    for (const auto& m : outcome.lost) {
        auto it = ranges_.find(m.range);
        if (it == ranges_.end() || it->second.lease.epoch != m.epoch) continue;
        events_.report(m.range,
                       // Worded as the server words it (changefeed.lease_lost()), whichever path found it.
                       Error(errc::lease_lost,
                             "lease on range " + std::to_string(m.range) + " of processor \"" + s_.stored_name +
                                 "\" on " + s_.info.schema_table + " is no longer held by \"" + s_.instance +
                                 "\" at epoch " + std::to_string(m.epoch) +
                                 " (SQLSTATE CF010). Hint: Another instance took the lease over; its checkpoint "
                                 "is not moved",
                             "CF010"));
        it->second.lost = true;
    }
}

// Follows the lease keeper's view: forget ranges lost or re-acquired at a
// new epoch, load new ones from their stored state.
void RangeWorker::sync_ranges(pqxx::connection& conn, const std::map<int, std::int64_t>& owned_now) {
    for (auto it = ranges_.begin(); it != ranges_.end();) {
        auto o = owned_now.find(it->first);
        if (o == owned_now.end() || o->second != it->second.lease.epoch) it = ranges_.erase(it);
        else ++it;
    }
    bool missing = false;
    for (const auto& [range, epoch] : owned_now)
        if (!ranges_.count(range)) missing = true;
    if (!missing) return;
    auto stored = load_leases(conn, s_.key);
    for (const auto& [range, epoch] : owned_now) {
        if (ranges_.count(range)) continue;
        auto st = stored.find(range);
        if (st == stored.end() || st->second.epoch != epoch) continue;  // changed hands meanwhile
        RangeState rs;
        rs.lease = st->second;
        rs.persisted = rs.lease.checkpoint;
        rs.last_persist = Clock::now();
        ranges_.emplace(range, std::move(rs));
    }
}

// changefeed.maintain() now and then; its failures never stop reading.
void RangeWorker::maybe_maintain(pqxx::connection& conn) {
    if (opt_.maintain_interval <= std::chrono::milliseconds(0) || Clock::now() < next_maintain_) return;
    next_maintain_ = Clock::now() + opt_.maintain_interval;
    try {
        translated([&] {
            pqxx::nontransaction tx(conn);
            tx.exec("SELECT changefeed.maintain()");
        });
    } catch (const Error& e) {
        if (is_connection_error(e)) throw;
        // A role without the right to maintain: the worker or cron does it; say so once.
        if (e.code() == make_error_code(errc::permission_denied)) {
            if (maintain_denied_told_) return;
            maintain_denied_told_ = true;
        }
        events_.report(std::nullopt, e, std::current_exception());
    }
}

// An unusable checkpoint on a range: resync it from the table when asked to,
// else halt it.  Never a restart from "now".  Returns whether there was work.
bool RangeWorker::history_lost(pqxx::connection& conn, const Context& ctx, RangeState& st, const Error& e) {
    const int range = ctx.range_id;
    const bool latest = s_.feed->mode == FeedMode::latest_version;
    if (s_.feed->resync && latest) {
        std::string pos;
        if (!fenced(range, st, [&] { pos = resync(conn, s_.key, range, st.lease.epoch); })) return false;
        st.lease.checkpoint = st.persisted = pos;
        st.lease.backfill_done = false;
        st.lease.backfill_after.reset();
        st.lease.backfill_rows = 0;
        st.estimated = -1;
        st.last_persist = Clock::now();
        events_.report(range,
                       Error(errc::history_lost,
                             "history lost on range " + std::to_string(range) + " of processor \"" + s_.name +
                                 "\"; resync: re-reading the range's current rows from " + s_.collection.table() +
                                 ", then continuing from the log. Server: " + e.what(),
                             e.sqlstate()),
                       std::make_exception_ptr(e));
        return true;
    }
    Error lost(errc::history_lost,
               history_lost_runbook(s_.collection.table(), s_.stored_name, range, latest, lost_because(e), e.what()),
               e.sqlstate());
    const RecoveryDecision d = events_.decide(Incident{Situation::history_lost, range, lost.code(), lost.what(), 0});
    events_.report_decided(range, lost, std::make_exception_ptr(e), d);
    if (d.halts()) halted_.insert(range);
    else st.retry_at = Clock::now() + opt_.retry_delay;  // the policy keeps trying; nothing is skipped
    return false;
}

void RangeWorker::drop_lost() {
    for (auto it = ranges_.begin(); it != ranges_.end();) {
        if (it->second.lost) {
            leases_.forget(it->first, it->second.lease.epoch);
            it = ranges_.erase(it);
        } else {
            ++it;
        }
    }
}

// Runs the user's code on a batch (the handler in any of its shapes): every
// handler failure goes through here.
bool RangeWorker::call_handler(const std::function<void()>& handler, const Context& ctx, RangeState& st) {
    try {
        handler();
        failures_.erase(ctx.range_id);
        return true;
    } catch (...) {
        handler_failed(ctx.range_id, st, std::current_exception());
        return false;
    }
}

// Every failure of the user's code on a batch: the recovery policy decides
// between retrying the batch after retry_delay and halting the range.
void RangeWorker::handler_failed(int range, RangeState& st, std::exception_ptr p) {
    const Error e = handler_failure(p, "handler failed");
    const RecoveryDecision d = events_.decide(Incident{Situation::handler_failing, range, e.code(), e.what(),
                                                       ++failures_[range]});
    events_.report_decided(range, e, p, d);
    if (d.halts()) halted_.insert(range);
    else st.retry_at = Clock::now() + opt_.retry_delay;
}

// Runs a fenced checkpoint; a lost lease marks the range for dropping.
template <class F>
bool RangeWorker::fenced(int range, RangeState& st, F&& store) {
    try {
        store();
        return true;
    } catch (const Error& e) {
        if (e.code() != make_error_code(errc::lease_lost)) throw;
        events_.report(range, e, std::current_exception());
        st.lost = true;
        return false;
    }
}

// One read (or backfill page) of one range; true if there was work.
bool RangeWorker::step(pqxx::connection& conn, int range, RangeState& st) {
    const Context ctx = context_of(range, st);
    if (!st.lease.backfill_done) return backfill_step(conn, ctx, st);

    ReadResult rr;
    try {
        rr = read_range(conn, s_.collection.table(), st.lease.checkpoint, opt_.max_batch_size, range, s_.feed->mode,
                        s_.scope);
    } catch (const Error& e) {
        if (!unusable_checkpoint(e)) throw;
        return history_lost(conn, ctx, st, e);
    }
    if (rr.changes.empty()) {
        advance_idle(conn, range, st, rr.position);
        return false;
    }
    if (stop_source_.stop_requested()) return false;
    return deliver(conn, ctx, st, rr.changes, rr.position);
}

// The ranges reading the log, each from its checkpoint, in one read; the
// handler per range with that range's changes; the round's checkpoints in
// one call at the end (also when stopping midway: those ranges were handled).
bool RangeWorker::log_round(pqxx::connection& conn, pqxx::connection& reader, const std::vector<int>& group) {
    // `group` is in range order (plan()), as ranges_ is: both are walked
    // side by side rather than searched, range by range.
    const auto walk = [this](std::map<int, RangeState>::iterator& it, int range) -> RangeState& {
        while (it != ranges_.end() && it->first < range) ++it;
        if (it == ranges_.end() || it->first != range) return ranges_.at(range);
        return it->second;
    };
    std::map<int, std::string> since;
    {
        auto it = ranges_.begin();
        for (int range : group) since.emplace_hint(since.end(), range, walk(it, range).lease.checkpoint);
    }
    // One read for all the ranges, of max_read_size changes or, if more,
    // max_batch_size per range for up to 16 ranges: ranges at diverged
    // positions each catch up in the same call, and a range's share is handed
    // over in batches of max_batch_size (deliver_in_batches).
    const long per_ranges = static_cast<long>(opt_.max_batch_size) *
                            std::min<long>(16, static_cast<long>(group.size()));
    const int budget = static_cast<int>(std::min<long>(100000, std::max<long>(per_ranges, opt_.max_read_size)));
    MultiReadResult rr;
    // Rows whose changes are parsed once the next read is under way.
    std::optional<pqxx::result> unparsed;
    bool ahead_used = false;
    const auto wait = std::exchange(wait_next_, std::chrono::milliseconds(0));
    try {
        unparsed = read_ahead_.take(since, budget);
        ahead_used = unparsed.has_value();
        std::optional<MultiReadResult> polled;
        if (!unparsed && wait.count() > 0) {
            polled = long_poll(conn, since, budget, wait);
            if (polled && polled->rows == 0) return false;  // interrupted: nothing read
        }
        if (polled) rr = std::move(*polled);
        else if (!unparsed)
            unparsed = fetch_rows(reader, s_.collection.table(), since, budget, opt_.max_batch_size, s_.feed->mode,
                                  s_.scope);
        if (unparsed) rr = resume_of(*unparsed);
    } catch (const Error& e) {
        if (reads_standby() && standby_behind(e)) {
            // The standby has not replayed these positions yet, or a replay
            // conflict cancelled the read: a delay, read again shortly.
            const auto at = Clock::now() + std::max(opt_.retry_delay, std::chrono::milliseconds(10));
            for (int range : group) ranges_.at(range).retry_at = at;
            return false;
        }
        if (!unusable_checkpoint(e)) throw;
        // History loss is handled range by range, on the primary: what a
        // standby refuses (a key it lacks, a position newer than its replay)
        // the primary may still read, and then it does, for this round.
        bool any = false;
        for (int range : group) any |= step(conn, range, ranges_.at(range));
        return any;
    }
    // Ranges left unread (the budget ran out) are read on at once.
    bool busy = rr.resume.size() < group.size();
    // A full read: more is waiting, so read it while these changes are
    // handled, from where every range resumes if all goes well (take()
    // drops it otherwise).
    if (opt_.read_ahead && !busy && rr.total >= static_cast<std::size_t>(budget)) {
        std::map<int, std::string> next;
        for (int range : group) next[range] = rr.resume.at(range);
        read_ahead_.start(s_.collection.table(), std::move(next), budget, opt_.max_batch_size, s_.feed->mode, s_.scope);
    } else if (!ahead_used) {
        read_ahead_.rest();
    }
    if (unparsed) {
        parse_changes(*unparsed, s_.scope, rr);
        unparsed.reset();
    }
    std::vector<PendingCheckpoint> pending;
    auto state = ranges_.begin();
    for (int range : group) {
        RangeState& st = walk(state, range);
        auto resume = rr.resume.find(range);
        if (resume == rr.resume.end()) continue;
        auto batch = rr.changes.empty() ? rr.changes.end() : rr.changes.find(range);
        if (batch == rr.changes.end()) {
            advance_idle(conn, range, st, resume->second, &pending);
            continue;
        }
        if (stop_source_.stop_requested()) break;
        busy |= deliver_in_batches(conn, range, st, batch->second, rr.positions[range], resume->second, pending);
    }
    store_pending(pending);
    return busy;
}

// Hands a range's changes of one read to the handler in batches of at most
// max_batch_size, in order, each checkpointed at the position after its last
// change.  The range then resumes at the read's position with the other
// ranges of its read: cutting it off at its own position instead would make
// the next read scan the same windows again for each range apart.
bool RangeWorker::deliver_in_batches(pqxx::connection& conn, int range, RangeState& st, std::vector<Change>& changes,
                                     const std::vector<std::string>& positions, const std::string& resume_at,
                                     std::vector<PendingCheckpoint>& pending) {
    const std::size_t max = static_cast<std::size_t>(opt_.max_batch_size);
    const std::size_t pending_before = pending.size();
    std::size_t from = 0;
    bool busy = false;
    while (changes.size() - from > max) {
        std::vector<Change> part(std::make_move_iterator(changes.begin() + static_cast<std::ptrdiff_t>(from)),
                                 std::make_move_iterator(changes.begin() + static_cast<std::ptrdiff_t>(from + max)));
        // Read with positions_every = max_batch_size: this row carries one.
        const std::string& at = positions.at(from + max - 1);
        if (at.empty())
            throw Error(errc::database_error, "a batch of range " + std::to_string(range) +
                                                  " ends at a change the server sent without its position");
        busy |= deliver(conn, context_of(range, st), st, part, at, &pending);
        // A failed handler or a lost lease: the rest is read again later.
        if (st.lost || st.lease.checkpoint != at || stop_source_.stop_requested()) {
            keep_last_pending(pending, pending_before, range);
            return true;
        }
        from += max;
    }
    if (from > 0) changes.erase(changes.begin(), changes.begin() + static_cast<std::ptrdiff_t>(from));
    busy |= deliver(conn, context_of(range, st), st, changes, resume_at, &pending);
    keep_last_pending(pending, pending_before, range);
    return busy;
}

// One checkpoint per range and round: lease_checkpoint_many() updates each
// lease row once.
void RangeWorker::keep_last_pending(std::vector<PendingCheckpoint>& pending, std::size_t from, int range) {
    std::size_t last = pending.size();
    for (std::size_t i = from; i < pending.size(); ++i)
        if (pending[i].range == range) last = i;
    if (last == pending.size()) return;
    PendingCheckpoint keep = pending[last];
    pending.erase(std::remove_if(pending.begin() + static_cast<std::ptrdiff_t>(from), pending.end(),
                                 [&](const PendingCheckpoint& m) { return m.range == range; }),
                  pending.end());
    pending.push_back(std::move(keep));
}

// Hands a batch to the handler; checkpoints `position` after it returned
// (Delivery: how, for each shape).  Manual mode: reads on from `position`,
// stores nothing.
bool RangeWorker::deliver(pqxx::connection& conn, const Context& ctx, RangeState& st, const std::vector<Change>& batch,
                          const std::string& position, std::vector<PendingCheckpoint>* pending) {
    const std::size_t pending_before = pending ? pending->size() : 0;
    const int range = ctx.range_id;
    Mark before, after;
    before.position = st.lease.checkpoint;
    after.position = position;
    bool delivered = false;
    if (!fenced(range, st, [&] {
            delivered = delivery_.deliver(
                conn, BatchDelivery{batch, ctx, st.lease.epoch, before, after, stop_source_.get_token(), pending},
                [&](const std::function<void()>& f) { return call_handler(f, ctx, st); });
        }))
        return true;
    if (!delivered) return false;
    st.lease.checkpoint = position;
    // A deferred checkpoint counts as stored once store_pending() stored it.
    if (delivery_.automatic() && !(pending && pending->size() > pending_before)) {
        st.persisted = position;
        st.last_persist = Clock::now();
    }
    return true;
}

// Nothing to deliver: move on, and store the advancing position now and then
// rather than on every poll.
void RangeWorker::advance_idle(pqxx::connection& conn, int range, RangeState& st, const std::string& position,
                               std::vector<PendingCheckpoint>* pending) {
    events_.telemetry().caught_up(range);
    st.lease.checkpoint = position;
    if (delivery_.automatic() && position != st.persisted &&
        Clock::now() - st.last_persist >= opt_.idle_checkpoint_interval) {
        // Queued only where the batches' checkpoints go through the same
        // queue: one queued here and stored by the lease thread after a
        // projector's or transactional handler's batch committed its own
        // would move the checkpoint back, and a reconnect would then apply
        // that batch again.
        if (pending && delivery_.defers_checkpoints()) {
            pending->push_back(PendingCheckpoint{range, st.lease.epoch, position});
            return;
        }
        if (fenced(range, st, [&] { checkpoint(conn, s_.key, range, st.lease.epoch, position); })) {
            st.persisted = position;
            st.last_persist = Clock::now();
        }
    }
}

bool RangeWorker::backfill_step(pqxx::connection& conn, const Context& ctx, RangeState& st) {
    const int range = ctx.range_id;
    if (st.estimated < 0) st.estimated = estimated_rows(conn, s_.collection.table()) / std::max(1, s_.info.ranges);
    auto page = backfill_page(conn, s_.collection.table(), range, st.lease.backfill_after, opt_.max_batch_size,
                              s_.scope);
    const bool done = page.scanned < opt_.max_batch_size;
    auto after = page.last_key ? page.last_key : st.lease.backfill_after;
    auto rows = st.lease.backfill_rows + static_cast<std::int64_t>(page.changes.size());
    Mark before;  // where the backfill stands now
    before.backfill = true;
    before.backfill_after = st.lease.backfill_after;
    before.backfill_rows = st.lease.backfill_rows;
    before.backfill_done = false;
    Mark mark;
    mark.backfill = true;
    mark.backfill_after = after;
    mark.backfill_rows = rows;
    mark.backfill_done = done;
    if (!page.changes.empty()) {
        if (stop_source_.stop_requested()) return false;
        // While a range backfills its checkpoint is the backfill's position
        // (lease_init and lease_resync set both): it names this backfill.
        const std::string prefix = backfill_event_prefix(s_.info.id, st.lease.checkpoint);
        for (auto& c : page.changes) c.event_id = prefix + c.doc_id;
        bool delivered = false;
        if (!fenced(range, st, [&] {
                delivered = delivery_.deliver(
                    conn, BatchDelivery{page.changes, ctx, st.lease.epoch, before, mark, stop_source_.get_token()},
                    [&](const std::function<void()>& f) { return call_handler(f, ctx, st); });
            }))
            return false;
        if (!delivered) return false;
    } else if (!fenced(range, st, [&] { delivery_.store(conn, range, st.lease.epoch, mark); })) {
        return false;
    }
    st.lease.backfill_after = after;
    st.lease.backfill_rows = rows;
    st.lease.backfill_done = done;
    if (opt_.on_backfill_progress) {
        try {
            opt_.on_backfill_progress(BackfillProgress{range, rows, std::max(st.estimated, rows), done});
        } catch (...) {
        }
    }
    return true;
}

}  // namespace changefeed::detail
