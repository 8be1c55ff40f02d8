// Internal: the lease functions of the extension (extension/processors/leases.sql).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace changefeed::detail {

// Who calls: the table, the processor name and this instance's name.
struct LeaseKey {
    std::string table;
    std::string processor;
    std::string instance;
};

// A range's stored state at the epoch we hold it with.
struct RangeLease {
    int range_id = 0;
    std::int64_t epoch = 0;
    std::string checkpoint;
    bool backfill_done = true;
    std::optional<std::string> backfill_after;  // jsonb text of the last key delivered
    std::int64_t backfill_rows = 0;
};

// All functions throw changefeed::Error.
// Where a processor without checkpoints starts: at most one of these (none = now).
struct StartAt {
    bool from_beginning = false;
    std::optional<std::chrono::system_clock::time_point> time;
    std::string position;  // empty: none
};
void init_leases(pqxx::connection& c, const LeaseKey& k, const StartAt& start);
// Registers this instance's name for the calling session under `token`
// (Error(instance_name_in_use) when another live session holds it), and
// removes the registration if `token` still holds it.  Through a transaction
// pooler the name is held for `lease_duration` instead, renewed by the lease
// calls: the session changes from one call to the next.
void register_instance(pqxx::connection& c, const LeaseKey& k, const std::string& token,
                       std::chrono::milliseconds lease_duration);
void unregister_instance(pqxx::connection& c, const LeaseKey& k, const std::string& token);
// What a balancing step or a renewal answered: the processor's lease
// generation, and the leases owned (range -> epoch) unless no lease of the
// processor changed hands since the generation the caller knew.
struct LeaseAnswer {
    std::int64_t generation = 0;
    std::optional<std::map<int, std::int64_t>> owned;  // none: unchanged
};
// One balancing step (changefeed.lease_balance).
LeaseAnswer acquire_leases(pqxx::connection& c, const LeaseKey& k, std::chrono::milliseconds duration,
                           std::optional<std::int64_t> known);
// Extends this instance's expiry, and so all its leases (changefeed.lease_keep).
LeaseAnswer renew_leases(pqxx::connection& c, const LeaseKey& k, std::chrono::milliseconds duration,
                         std::optional<std::int64_t> known);
int release_leases(pqxx::connection& c, const LeaseKey& k);
// The stored state of the leases this instance owns.
std::map<int, RangeLease> load_leases(pqxx::connection& c, const LeaseKey& k);
// Fenced checkpoints: Error(lease_lost) when the lease changed hands.
void checkpoint(pqxx::connection& c, const LeaseKey& k, int range, std::int64_t epoch, const std::string& position);
// The checkpoints of many ranges in one call (changefeed.lease_checkpoint_many):
// each fenced on its own; returns the ranges whose lease changed hands (not
// moved), the others are stored.
struct PendingCheckpoint {
    int range = 0;
    std::int64_t epoch = 0;
    std::string position;
};
std::vector<int> checkpoint_many(pqxx::connection& c, const LeaseKey& k, const std::vector<PendingCheckpoint>& marks);
void checkpoint_backfill(pqxx::connection& c, const LeaseKey& k, int range, std::int64_t epoch,
                         const std::optional<std::string>& after, std::int64_t rows, bool done);
// The same two inside a transaction of the caller's (a transactional
// handler's, which commits the checkpoint with its own writes).
void checkpoint_in(pqxx::transaction_base& tx, const LeaseKey& k, int range, std::int64_t epoch,
                   const std::string& position);
void checkpoint_backfill_in(pqxx::transaction_base& tx, const LeaseKey& k, int range, std::int64_t epoch,
                            const std::optional<std::string>& after, std::int64_t rows, bool done);
// Restarts a range as a backfill (history lost, resync); returns the position
// the log continues from.  Fenced: Error(lease_lost).
std::string resync(pqxx::connection& c, const LeaseKey& k, int range, std::int64_t epoch);

}  // namespace changefeed::detail
