// The in-memory provider: the same processors (latest-version and
// all-versions; Handler, Projector and TransactionalHandler; same Change,
// Context and ProcessorOptions) over a collection held in memory, so that a
// projection can be unit-tested without a database.
//
//   changefeed::InMemoryCollection users;          // documents keyed by "id"
//   auto p = changefeed::make_processor(users, "projection", handler);
//   p.start();
//   users.upsert({{"id", 1}, {"name", "Ann"}});     // the handler sees it (a create)
//
// Same semantics as PostgreSQL where they should agree: only writes after the
// first start (or from the checkpoint), latest-version collapsing and no
// deletes, all-versions with previous images, checkpoints after the handler
// returned, a throwing handler gets the batch again, start_from_beginning
// (latest-version only), event ids stable across redeliveries, a projector's
// deduplication store (kept per processor name by the collection, so it
// survives a restart), transactional handlers (the projection's writes and the
// checkpoint applied together), start_time and start_position, manual
// checkpoints, and the recovery policy for failing handlers.  Differences, on
// purpose:
// - A range is one partition key value: Context::range is that value (the
//   components of a composite partition key joined by '/'), Context::range_id
//   a number in order of first appearance.  That is narrower than a range of a
//   real collection and never promises an order PostgreSQL would not keep.
// - Lease contention is not modelled: two processors under one name each see
//   every change (they share the checkpoints and the deduplication store,
//   though).  A processor "owns" every range the collection knows:
//   on_lease_acquired is called once per range, on the processor's own thread,
//   before the first read of it after start() (for a range that appears later,
//   when it appears); on_lease_released once per such range on stop.
//   Context::lease_epoch is always 1 and Context::checkpoint never fails with
//   lease_lost.
// - Nothing is recorded before the first processor starts (even one whose
//   start() then failed), unless InMemoryOptions::record_from_start; from then on every write is kept in the log for the
//   life of the collection (a collection of a unit test is small).  No
//   retention, so a stored checkpoint never loses history; resync and
//   maintain_interval are accepted and ignored.  history_lost comes only from
//   start(), for a start_position from before the recording began (writes
//   after it were not recorded).  A start_time from before the recording
//   began starts at its first change, as one from before enable() does on
//   PostgreSQL; one in the future starts at the end of the log (the writes
//   from start() on).
// - Positions (Context::position, start_position) are "mem.<seq>": every
//   change up to that sequence number was delivered; a position inside a
//   paged latest-version window is "mem.<lo>.<hi>.<after>", and as a
//   start_position it starts from the window's beginning (duplicates
//   possible, loss not).  A position beyond the collection's last write is a
//   foreign_position.
// - Event ids: "mem.<seq>" for log changes; "mem.b<n>.<doc id>" for backfill
//   rows, n numbering the collection's backfills.  The deduplication store is
//   not pruned (it lives as long as the collection).
// - Every write is its own transaction (txid = seq); writes are immediately
//   visible; the whole document is always written (no partial updates).
// - A TransactionalHandler writes to named in-memory projections through
//   InMemoryTransaction (Transaction::memory()); Transaction::sql() throws
//   Error(invalid_option).
#pragma once

#include <changefeed/history.hpp>
#include <changefeed/processor.hpp>

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace changefeed {

namespace detail {
struct MemoryStore;
struct MemoryTransactionAccess;
}  // namespace detail

struct InMemoryOptions {
    std::vector<std::string> key{"id"};      // fields forming the document id
    std::vector<std::string> partition_key;  // default: the key
    bool keep_previous = true;               // previous images on replace/delete
    // A connection string: a TransactionalHandler's tx.sql() is then a
    // transaction of that database (a scratch database of the test), which
    // commits right before the batch's checkpoint is stored and rolls back
    // when the handler throws.  So one handler, its SQL included, runs on both
    // providers (client/examples/order_totals.hpp).  Empty: tx.sql() throws
    // Error(invalid_option); write through tx.memory().
    std::string projection_database;
    // Keep every write in the log from the collection's construction on, as a
    // table's log does from enable(): as_of() and diff() (history.hpp) of any
    // position, start positions and times from before the first processor.
    // False: the log begins at the first processor's start().
    bool record_from_start = false;
};

// The transaction a TransactionalHandler gets on the in-memory provider:
// writes to named projections (key -> JSON value) of the collection, seen by
// this transaction's own reads at once and applied to the collection together
// with the batch's checkpoint when the handler returned; discarded when it
// threw.  With InMemoryOptions::projection_database, sql() too.  Only valid
// during the handler call.
class InMemoryTransaction final : public Transaction {
public:
    void put(const std::string& projection, const std::string& key, boost::json::value value);
    // Whether there was a value to erase (as this transaction sees it).
    bool erase(const std::string& projection, const std::string& key);
    // The value as this transaction sees it: its own writes, else the committed one.
    std::optional<boost::json::value> get(const std::string& projection, const std::string& key) const;

    // The transaction of InMemoryOptions::projection_database; throws
    // Error(invalid_option) when none was given.
    pqxx::transaction_base& sql() override;
    InMemoryTransaction& memory() override { return *this; }

private:
    friend struct detail::MemoryTransactionAccess;
    explicit InMemoryTransaction(std::shared_ptr<detail::MemoryStore> store);
    std::shared_ptr<detail::MemoryStore> store_;
    pqxx::transaction_base* sql_ = nullptr;  // of projection_database, during the handler call
    // projection -> key -> value, none for an erase
    std::map<std::string, std::map<std::string, std::optional<boost::json::value>>> writes_;
};

class InMemoryCollection {
public:
    explicit InMemoryCollection(InMemoryOptions options = {});
    ~InMemoryCollection();
    InMemoryCollection(const InMemoryCollection&) = delete;
    InMemoryCollection& operator=(const InMemoryCollection&) = delete;

    // Writes, named for the operation they record (Operation); each is one
    // transaction.  Throw Error(invalid_option) for a document without its key
    // fields, a create of an existing id, a replace of a missing one.
    void create(boost::json::object document);   // as INSERT
    void replace(boost::json::object document);  // as UPDATE
    void upsert(boost::json::object document);   // a create or a replace, whichever applies
    bool delete_(const std::string& id);         // as DELETE; false if there was none
    void clear();                                // as TRUNCATE: one clear per range

    std::optional<boost::json::object> get(const std::string& id) const;
    std::size_t size() const;
    // The id of a document as changes carry it: the key's text, or a JSON
    // array of the texts for a composite key.
    std::string id_of(const boost::json::object& document) const;

    // The position of every write so far ("mem.<seq>"), for
    // Processor::wait_for: PostgreSQL's changefeed.current_position().
    std::string current_position() const;

    // A copy of a projection transactional handlers wrote (empty if none).
    std::map<std::string, boost::json::value> projection(const std::string& name) const;

    friend Processor make_processor(InMemoryCollection&, std::string, ProcessorHandler, FeedOptions);
    friend void wait_for(const InMemoryCollection&, const std::string&, const std::string&, std::chrono::milliseconds);
    friend std::vector<Document> as_of(const InMemoryCollection&, const std::string&);
    friend std::vector<NetChange> diff(const InMemoryCollection&, const std::string&, const std::string&);

private:
    std::shared_ptr<detail::MemoryStore> store_;
};

// A processor of the in-memory collection's feed, as make_processor of a
// Collection (processor.hpp): the same handler shapes and options.
Processor make_processor(InMemoryCollection& collection, std::string name, ProcessorHandler handler,
                         FeedOptions options = {});

// The free wait_for() (processor.hpp) on the in-memory provider: returns once
// the processors named `processor` have handled every change before
// `position`, with no Processor object at hand.  The same errors.
void wait_for(const InMemoryCollection& collection, const std::string& processor, const std::string& position,
              std::chrono::milliseconds timeout = std::chrono::seconds(30));

}  // namespace changefeed
