// Calls of the lease functions.  Every call is its own short transaction, so
// a lease change is visible to the other instances at once.  The functions
// check that the calling role owns the processor (42501 otherwise); nothing
// here reads the extension's tables directly.
#include "lease/lease_store.hpp"

#include "core/db.hpp"
#include "core/pqxx_compat.hpp"
#include "core/statements.hpp"
#include "core/time_text.hpp"

#include <boost/json/array.hpp>
#include <boost/json/serialize.hpp>

namespace changefeed::detail {
namespace {

std::string interval_of(std::chrono::milliseconds d) { return std::to_string(d.count()) + " milliseconds"; }

}  // namespace

void init_leases(pqxx::connection& c, const LeaseKey& k, const StartAt& start) {
    std::optional<std::string> time;
    if (start.time) time = rfc3339_utc(*start.time, 6);
    std::optional<std::string> position;
    if (!start.position.empty()) position = start.position;
    translated_names(k.processor, k.instance, [&] {
        pqxx::work tx(c);
        tx.exec_params("SELECT changefeed.lease_init($1::regclass, $2, $3, $4::timestamptz, $5)", k.table, k.processor,
                       start.from_beginning, time, position);
        tx.commit();
    });
}

namespace {

// instance_register and instance_unregister take the same arguments.
void call_instance_function(pqxx::connection& c, const char* function, const LeaseKey& k, const std::string& token) {
    translated_names(k.processor, k.instance, [&] {
        pqxx::work tx(c);
        tx.exec_params(std::string("SELECT changefeed.") + function + "($1::regclass, $2, $3, $4)", k.table,
                       k.processor, k.instance, token);
        tx.commit();
    });
}

}  // namespace

void register_instance(pqxx::connection& c, const LeaseKey& k, const std::string& token,
                       std::chrono::milliseconds lease_duration) {
    if (!through_transaction_pooler(c)) return call_instance_function(c, "instance_register", k, token);
    translated_names(k.processor, k.instance, [&] {
        pqxx::work tx(c);
        tx.exec_params("SELECT changefeed.instance_register($1::regclass, $2, $3, $4, $5::interval)", k.table,
                       k.processor, k.instance, token, interval_of(lease_duration));
        tx.commit();
    });
}

void unregister_instance(pqxx::connection& c, const LeaseKey& k, const std::string& token) {
    call_instance_function(c, "instance_unregister", k, token);
}

namespace {

// lease_balance and lease_keep take the same arguments and answer
// (generation, range_id, epoch) rows: one with a null range when nothing
// changed since `known` (or nothing is owned).
LeaseAnswer lease_step(pqxx::connection& c, const char* function, const LeaseKey& k, std::chrono::milliseconds duration,
                       std::optional<std::int64_t> known) {
    return translated_names(k.processor, k.instance, [&] {
        // Prepared once per connection: the lease thread calls both every
        // few seconds.  One statement, its own transaction.
        const std::string name = std::string("changefeed_") + function;
        pqxx::nontransaction tx(c);
        auto r = exec_statement(c, tx, name,
                                std::string("SELECT generation, range_id, epoch FROM changefeed.") + function +
                                    "($1::regclass, $2, $3, $4::interval, $5::bigint)",
                                k.table, k.processor, k.instance, interval_of(duration), known);
        tx.commit();
        LeaseAnswer out;
        if (r.empty()) return out;  // the processor row is gone: nothing owned
        out.generation = r[0][0].as<std::int64_t>();
        if (known && out.generation == *known) return out;
        out.owned.emplace();
        for (const auto& row : r)
            if (!row[1].is_null()) (*out.owned)[row[1].as<int>()] = row[2].as<std::int64_t>();
        return out;
    });
}

}  // namespace

LeaseAnswer acquire_leases(pqxx::connection& c, const LeaseKey& k, std::chrono::milliseconds duration,
                           std::optional<std::int64_t> known) {
    return lease_step(c, "lease_balance", k, duration, known);
}

LeaseAnswer renew_leases(pqxx::connection& c, const LeaseKey& k, std::chrono::milliseconds duration,
                         std::optional<std::int64_t> known) {
    return lease_step(c, "lease_keep", k, duration, known);
}

int release_leases(pqxx::connection& c, const LeaseKey& k) {
    return translated_names(k.processor, k.instance, [&] {
        pqxx::work tx(c);
        auto r = tx.exec_params("SELECT changefeed.lease_release($1::regclass, $2, $3)", k.table, k.processor,
                                k.instance);
        tx.commit();
        return r[0][0].as<int>();
    });
}

std::map<int, RangeLease> load_leases(pqxx::connection& c, const LeaseKey& k) {
    return translated_names(k.processor, k.instance, [&] {
        pqxx::read_transaction tx(c);
        auto r = tx.exec_params("SELECT range_id, epoch, checkpoint, backfill_done, backfill_after::text, backfill_rows"
                                "  FROM changefeed.lease_owned($1::regclass, $2, $3)",
                                k.table, k.processor, k.instance);
        std::map<int, RangeLease> out;
        for (const auto& row : r) {
            RangeLease l;
            l.range_id = row[0].as<int>();
            l.epoch = row[1].as<std::int64_t>();
            l.checkpoint = row[2].as<std::string>();
            l.backfill_done = row[3].as<bool>();
            if (!row[4].is_null()) l.backfill_after = row[4].as<std::string>();
            l.backfill_rows = row[5].as<std::int64_t>();
            out[l.range_id] = l;
        }
        return out;
    });
}

void checkpoint(pqxx::connection& c, const LeaseKey& k, int range, std::int64_t epoch, const std::string& position) {
    translated_names(k.processor, k.instance, [&] {
        pqxx::work tx(c);
        // A checkpoint lost in a server crash only means a re-delivery (the
        // feed is at least once), so it need not wait for the WAL flush: that
        // wait would be paid after every handled batch.
        tx.exec("SET LOCAL synchronous_commit = off");
        checkpoint_in(tx, k, range, epoch, position);
        tx.commit();
    });
}

std::vector<int> checkpoint_many(pqxx::connection& c, const LeaseKey& k, const std::vector<PendingCheckpoint>& marks) {
    // Array arguments as jsonb text (libpqxx 6 has no array parameters).
    boost::json::array ranges, epochs, positions;
    for (const auto& m : marks) {
        ranges.emplace_back(m.range);
        epochs.emplace_back(m.epoch);
        positions.emplace_back(m.position);
    }
    return translated_names(k.processor, k.instance, [&] {
        // Prepared once per connection: it runs after every round.  One
        // round trip: the statement is its own transaction, and set_config(...,
        // true) lasts until its commit (as SET LOCAL in checkpoint()).
        static const std::string sql =
            "SELECT changefeed.lease_checkpoint_many($1::regclass, $2, $3,"
            "       ARRAY(SELECT e::int FROM pg_catalog.jsonb_array_elements_text($4::jsonb) WITH ORDINALITY t(e, i) ORDER BY i),"
            "       ARRAY(SELECT e::bigint FROM pg_catalog.jsonb_array_elements_text($5::jsonb) WITH ORDINALITY t(e, i) ORDER BY i),"
            "       ARRAY(SELECT e FROM pg_catalog.jsonb_array_elements_text($6::jsonb) WITH ORDINALITY t(e, i) ORDER BY i))"
            "  FROM (SELECT pg_catalog.set_config('synchronous_commit', 'off', true)) AS no_flush_wait";
        pqxx::nontransaction tx(c);
        auto r = exec_statement(c, tx, "changefeed_checkpoint_many", sql, k.table, k.processor, k.instance,
                                boost::json::serialize(ranges), boost::json::serialize(epochs),
                                boost::json::serialize(positions));
        tx.commit();
        std::vector<int> lost;
        for (const auto& row : r) lost.push_back(row[0].as<int>());
        return lost;
    });
}

void checkpoint_backfill(pqxx::connection& c, const LeaseKey& k, int range, std::int64_t epoch,
                         const std::optional<std::string>& after, std::int64_t rows, bool done) {
    translated_names(k.processor, k.instance, [&] {
        pqxx::work tx(c);
        checkpoint_backfill_in(tx, k, range, epoch, after, rows, done);
        tx.commit();
    });
}

void checkpoint_in(pqxx::transaction_base& tx, const LeaseKey& k, int range, std::int64_t epoch,
                   const std::string& position) {
    translated_names(k.processor, k.instance, [&] {
        tx.exec_params("SELECT changefeed.lease_checkpoint($1::regclass, $2, $3, $4, $5, $6)", k.table, k.processor,
                       range, k.instance, epoch, position);
    });
}

void checkpoint_backfill_in(pqxx::transaction_base& tx, const LeaseKey& k, int range, std::int64_t epoch,
                            const std::optional<std::string>& after, std::int64_t rows, bool done) {
    translated_names(k.processor, k.instance, [&] {
        tx.exec_params("SELECT changefeed.lease_backfill_checkpoint($1::regclass, $2, $3, $4, $5, $6::jsonb, $7, $8)",
                       k.table, k.processor, range, k.instance, epoch, after, rows, done);
    });
}

std::string resync(pqxx::connection& c, const LeaseKey& k, int range, std::int64_t epoch) {
    return translated_names(k.processor, k.instance, [&] {
        pqxx::work tx(c);
        auto r = tx.exec_params("SELECT changefeed.lease_resync($1::regclass, $2, $3, $4, $5)", k.table, k.processor,
                                range, k.instance, epoch);
        tx.commit();
        return r[0][0].as<std::string>();
    });
}

}  // namespace changefeed::detail
