#include "deliver/delivery.hpp"

#include "core/db.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cstdio>
#include <set>

namespace changefeed::detail {
namespace {

// A text[] argument as jsonb text (libpqxx 6 has no array parameters): the
// SQL unpacks it with jsonb_array_elements_text, so no id is ever spliced.
std::string json_array_of(const std::vector<std::string>& ids) {
    boost::json::array a;
    a.reserve(ids.size());
    for (const auto& id : ids) a.emplace_back(id);
    return boost::json::serialize(a);
}

std::set<std::string> dedup_applied(pqxx::transaction_base& tx, const LeaseKey& k,
                                    const std::vector<std::string>& ids) {
    return translated_names(k.processor, std::nullopt, [&] {
        auto r = tx.exec_params("SELECT changefeed.dedup_applied($1::regclass, $2,"
                                "       ARRAY(SELECT pg_catalog.jsonb_array_elements_text($3::jsonb)))",
                                k.table, k.processor, json_array_of(ids));
        std::set<std::string> out;
        for (const auto& row : r) out.insert(row[0].as<std::string>());
        return out;
    });
}

void dedup_record_in(pqxx::transaction_base& tx, const LeaseKey& k, const std::vector<std::string>& ids) {
    translated_names(k.processor, std::nullopt, [&] {
        tx.exec_params("SELECT changefeed.dedup_record($1::regclass, $2,"
                       "       ARRAY(SELECT pg_catalog.jsonb_array_elements_text($3::jsonb)))",
                       k.table, k.processor, json_array_of(ids));
    });
}

void dedup_record(pqxx::connection& c, const LeaseKey& k, const std::vector<std::string>& ids) {
    translated_names(k.processor, std::nullopt, [&] {
        pqxx::work tx(c);
        dedup_record_in(tx, k, ids);
        tx.commit();
    });
}

void store_in(pqxx::transaction_base& tx, const LeaseKey& k, int range, std::int64_t epoch, const Mark& m) {
    if (m.backfill) checkpoint_backfill_in(tx, k, range, epoch, m.backfill_after, m.backfill_rows, m.backfill_done);
    else checkpoint_in(tx, k, range, epoch, m.position);
}

void store_on(pqxx::connection& c, const LeaseKey& k, int range, std::int64_t epoch, const Mark& m) {
    if (m.backfill) checkpoint_backfill(c, k, range, epoch, m.backfill_after, m.backfill_rows, m.backfill_done);
    else checkpoint(c, k, range, epoch, m.position);
}

// The open transaction a TransactionalHandler writes in.
class PgTransaction final : public Transaction {
public:
    explicit PgTransaction(pqxx::transaction_base& tx) : tx_(tx) {}
    pqxx::transaction_base& sql() override { return tx_; }
    InMemoryTransaction& memory() override {
        throw Error(errc::invalid_option, "memory() is the in-memory provider's transaction; on PostgreSQL use sql()");
    }

private:
    pqxx::transaction_base& tx_;
};

}  // namespace

std::string backfill_event_prefix(int collection_id, const std::string& backfill_position) {
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a 64
    for (unsigned char ch : backfill_position) {
        h ^= ch;
        h *= 1099511628211ull;
    }
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
    return std::to_string(collection_id) + ".b" + hex + ".";
}

std::function<void()> ManualCheckpoints::bind(int range, std::int64_t epoch, Mark mark) {
    std::uint64_t order;
    {
        std::lock_guard lock(mu_);
        order = ++delivered_[range];
    }
    // Shared: the closure may outlive the processor's run (it then fails
    // with lease_lost, the leases being released).
    return [self = shared_from_this(), range, epoch, order, mark = std::move(mark)] {
        self->store(range, epoch, order, mark);
    };
}

void ManualCheckpoints::store(int range, std::int64_t epoch, std::uint64_t order, const Mark& mark) {
    std::lock_guard lock(mu_);
    auto it = stored_.find(range);
    if (it != stored_.end() && it->second >= order) return;  // a later batch's checkpoint is stored already
    try {
        if (!conn_) conn_ = connect(conninfo_);
        store_on(*conn_, key_, range, epoch, mark);
    } catch (...) {
        Error e = to_error(std::current_exception());
        if (is_connection_error(e)) conn_.reset();  // the next call reconnects
        throw e;
    }
    stored_[range] = order;
}

Delivery::Delivery(std::string conninfo, LeaseKey key, const ProcessorHandler& handler, const ProcessorOptions& options,
                   ConsumerEvents& events, std::shared_ptr<ProjectionCounters> counters,
                   std::function<bool(std::stop_token)> before_checkpoint)
    : conninfo_(std::move(conninfo)), key_(std::move(key)), handler_(handler), options_(options), events_(events),
      counters_(std::move(counters)), before_checkpoint_(std::move(before_checkpoint)) {
    if (!automatic()) manual_ = std::make_shared<ManualCheckpoints>(conninfo_, key_);
}

// Measured only with a Metrics object: the time spent in the guarded user
// code, the duplicates a projector skipped, the age of the batch's last change.
bool Delivery::deliver(pqxx::connection& conn, BatchDelivery batch, const Guard& guard) {
    std::int64_t duplicates = 0;
    Telemetry& telemetry = events_.telemetry();
    if (!telemetry.measuring()) return hand_over(conn, batch, guard, duplicates);
    std::chrono::nanoseconds spent{0};
    const Guard timed = [&](const std::function<void()>& user_code) {
        const auto t0 = std::chrono::steady_clock::now();
        const bool ok = guard(user_code);
        spent += std::chrono::steady_clock::now() - t0;
        return ok;
    };
    if (!hand_over(conn, batch, timed, duplicates)) return false;
    telemetry.delivered(batch.ctx.range_id, static_cast<std::int64_t>(batch.changes.size()), spent, duplicates,
                        batch.after.backfill ? std::nullopt : batch.changes.back().written_at);
    return true;
}

bool Delivery::hand_over(pqxx::connection& conn, BatchDelivery& batch, const Guard& guard, std::int64_t& duplicates) {
    Context& ctx = batch.ctx;
    const Mark& after = batch.after;
    ctx.position = after.backfill ? std::string() : after.position;
    ctx.stop = batch.stop;
    switch (shape_of(handler_)) {
    case HandlerShape::handler:
        if (manual_) ctx.checkpoint = manual_->bind(ctx.range_id, batch.epoch, after);
        if (!guard([&] { std::get<Handler>(handler_)(batch.changes, ctx); })) return false;
        break;
    case HandlerShape::projector:
        // Its checkpoint commits with the record of what it applied.
        return project(conn, batch, guard, duplicates);
    case HandlerShape::transactional: return transact(conn, batch, guard);
    }
    if (!automatic()) return true;
    if (batch.deferred && !after.backfill) {
        batch.deferred->push_back(PendingCheckpoint{ctx.range_id, batch.epoch, after.position});
        return true;
    }
    if (before_checkpoint_ && !before_checkpoint_(batch.stop)) return false;
    store_on(conn, key_, ctx.range_id, batch.epoch, after);
    return true;
}

void Delivery::store(pqxx::connection& conn, int range, std::int64_t epoch, const Mark& after) {
    if (automatic()) store_on(conn, key_, range, epoch, after);
}

// One transaction per batch, fenced from its start: the lease row is locked
// (the checkpoint stored again as it is, CF010 if the range changed hands)
// until the ids applied are recorded and the new checkpoint is stored.  An
// instance taking the range over meanwhile (a steal while balancing, or an
// expired lease) waits for that commit and then skips what was applied, so
// a lease that moves re-applies nothing.  A process frozen mid-batch would
// hold the lock: idle_in_transaction_session_timeout ends its transaction
// after lease_duration, and what it applied then can come twice.
// The changes recorded in the store are skipped; the ids of those the
// projector was called for are recorded after the batch, or after it threw
// (for the ones before, without the checkpoint), so a retry calls it only
// from the one that threw.  A record that fails (the connection broke under
// the batch) keeps its ids here: they are recorded on the next connection
// before anything is read again (flush_unrecorded), and the re-read skips them.
bool Delivery::project(pqxx::connection& conn, const BatchDelivery& b, const Guard& guard, std::int64_t& duplicates) {
    const std::vector<Change>& batch = b.changes;
    const Context& ctx = b.ctx;
    flush_unrecorded(conn);
    std::vector<std::string> ids;
    ids.reserve(batch.size());
    for (const auto& c : batch) ids.push_back(c.event_id);
    std::unique_ptr<pqxx::work> tx = translated([&] { return std::make_unique<pqxx::work>(conn); });
    std::set<std::string> recorded;
    translated([&] {
        const auto idle = std::max<std::int64_t>(1000, options_.lease_duration.count());
        tx->exec("SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', '" + std::to_string(idle) +
                 "', true)");
    });
    store_in(*tx, key_, ctx.range_id, b.epoch, b.before);  // the fence
    recorded = dedup_applied(*tx, key_, ids);
    std::vector<std::string> done;
    std::vector<Error> alerts;
    const bool ok = guard([&] {
        for (const auto& c : batch) {
            bool duplicate = recorded.count(c.event_id) > 0;
            if (!duplicate) {
                duplicate = std::get<Projector>(handler_)(c, ctx) == ProjectionResult::skipped_duplicate;
                done.push_back(c.event_id);
            }
            duplicates += duplicate;
            if (auto alert = counters_->count(duplicate)) alerts.push_back(std::move(*alert));
        }
    });
    for (const auto& a : alerts) events_.report(ctx.range_id, a);
    try {
        if (!done.empty()) dedup_record_in(*tx, key_, done);
        if (ok) store_in(*tx, key_, ctx.range_id, b.epoch, b.after);
        translated([&] { tx->commit(); });
    } catch (...) {
        // Not recorded, or in doubt (a commit whose answer was lost):
        // recorded again on the next connection (a known id is ignored).
        unrecorded_.insert(unrecorded_.end(), done.begin(), done.end());
        throw;
    }
    return ok;
}

bool Delivery::defers_checkpoints() const { return automatic() && shape_of(handler_) == HandlerShape::handler; }

void Delivery::flush_unrecorded(pqxx::connection& conn) {
    if (unrecorded_.empty()) return;
    // In parts within check_event_ids()' limit; a part recorded twice (its
    // commit was in doubt) is harmless: dedup_record ignores known ids.
    constexpr std::size_t part = 10000;
    while (!unrecorded_.empty()) {
        const std::size_t n = std::min(part, unrecorded_.size());
        const auto end = unrecorded_.begin() + static_cast<std::ptrdiff_t>(n);
        dedup_record(conn, key_, std::vector<std::string>(unrecorded_.begin(), end));
        unrecorded_.erase(unrecorded_.begin(), end);
    }
}

// Exactly once: the handler's writes and the checkpoint commit together.  The
// checkpoint's fence (changefeed.lease_fence) locks the lease row FOR NO KEY
// UPDATE until the commit, if this instance still owns it at `epoch`.  A
// takeover (lease_acquire/lease_steal, reset_checkpoint) updates that row: if
// it committed first, the fence sees the new owner or epoch (READ COMMITTED
// re-checks the row it waited for) and raises CF010, and the handler's writes
// roll back with it; if the fence came first, the takeover waits for this
// commit and only then moves the lease.  So a range's writes commit only
// while its lease is held, and each batch's exactly once with its checkpoint.
bool Delivery::transact(pqxx::connection& conn, const BatchDelivery& b, const Guard& guard) {
    const Context& ctx = b.ctx;
    std::unique_ptr<pqxx::work> tx = translated([&] { return std::make_unique<pqxx::work>(conn); });
    PgTransaction t(*tx);
    if (!guard([&] { std::get<TransactionalHandler>(handler_)(b.changes, t, ctx); })) {
        try {
            tx->abort();
        } catch (...) {
        }
        tx.reset();
        if (!conn.is_open()) throw Error(errc::connection_failed, "the connection dropped during the handler");
        return false;
    }
    translated([&] {
        store_in(*tx, key_, ctx.range_id, b.epoch, b.after);
        tx->commit();
    });
    return true;
}

}  // namespace changefeed::detail
