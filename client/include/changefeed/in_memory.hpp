// The in-memory provider: the same processors (latest-version and
// all-versions, same Handler, Change, Context and ProcessorOptions) over a
// collection held in memory, so that a projection can be unit-tested without
// a database.
//
//   changefeed::InMemoryCollection users;          // documents keyed by "id"
//   auto p = changefeed::make_latest_version_processor(users, "projection", handler);
//   p.start();
//   users.upsert({{"id", 1}, {"name", "Ann"}});     // the handler sees it (a create)
//
// Same semantics as PostgreSQL where they should agree: only writes after the
// first start (or from the checkpoint), latest-version collapsing and no
// deletes, all-versions with previous images, checkpoints after the handler
// returned, a throwing handler gets the batch again, start_from_beginning
// (latest-version only).  Differences, on purpose:
// - A range is one partition key value: Context::range is that value (the
//   components of a composite partition key joined by '/'), Context::range_id
//   a number in order of first appearance.  That is narrower than a range of a
//   real collection and never promises an order PostgreSQL would not keep.
// - Lease contention is not modelled: two processors under one name each see
//   every change (they share the checkpoints, though).
// - The log is kept for whatever could still be read: nothing is recorded
//   before the first processor starts; once a checkpoint exists the writes
//   after it are kept for the life of the collection.  No retention, so no
//   history_lost; resync and maintain_interval are accepted and ignored.
// - Every write is its own transaction (txid = seq); writes are immediately
//   visible; the whole document is always written (no partial updates).
#pragma once

#include <changefeed/processor.hpp>

#include <boost/json/object.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace changefeed {

namespace detail {
struct MemoryStore;
}

struct InMemoryOptions {
    std::vector<std::string> key{"id"};     // fields forming the document id
    std::vector<std::string> partition_key;  // default: the key
    bool keep_previous = true;               // previous images on replace/delete
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

    // The options' type says the feed, as for Processor.
    Processor make_processor(std::string name, Handler handler, LatestVersionOptions options = {});
    Processor make_processor(std::string name, Handler handler, AllVersionsOptions options);

private:
    std::shared_ptr<detail::MemoryStore> store_;
};

Processor make_latest_version_processor(InMemoryCollection& collection, std::string name, Handler handler,
                                        LatestVersionOptions options = {});
Processor make_all_versions_processor(InMemoryCollection& collection, std::string name, Handler handler,
                                      AllVersionsOptions options = {});

}  // namespace changefeed
