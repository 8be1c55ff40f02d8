// The outbox bridge: each change mapped to an owned envelope (an integration
// event, not the storage schema) and handed to a publisher; the batch is
// checkpointed only after the publisher confirmed every envelope of it.
// Publish then checkpoint: at least once, so consumers deduplicate on the
// envelope's id (the change's event id).  See docs/bridge.md.
//
//   changefeed::NatsPublisher nats({.url = "nats://127.0.0.1:4222"});     // nats_publisher.hpp
//   changefeed::Bridge bridge(orders, "orders-to-nats",
//                             changefeed::cloudevents_mapper({.source_prefix = "/shop"}), nats);
//   bridge.start();
//
// The bridge depends on the Publisher port only; adapters (NATS JetStream:
// changefeed/nats_publisher.hpp, library changefeed::nats) implement it.
#pragma once

#include <changefeed/change.hpp>
#include <changefeed/collection.hpp>
#include <changefeed/processor.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace changefeed {

// One integration event as a publisher sends it.
struct Envelope {
    std::string id;       // unique per event, the same on every redelivery: the deduplication key
    std::string table;    // the source table ("schema.table"), for a publisher's default routing
    std::string subject;  // where it goes (a NATS subject); empty = the publisher's default for the table
    std::string content_type = "application/json";
    std::string body;     // the serialized event
    std::map<std::string, std::string> headers;  // extra transport headers
};

// Maps one change to the envelopes it publishes: none (filtered out), one, or
// several.  A mapper that throws fails the batch like a throwing handler
// (nothing published is checkpointed; the batch is read again).
using Mapper = std::function<std::vector<Envelope>(const Change& change, const Context& context)>;

// The port a transport implements.
class Publisher {
public:
    virtual ~Publisher() = default;
    // Publishes `envelopes` in order and returns once the broker confirmed
    // every one (stored or recognized as a duplicate).  Throws
    // changefeed::Error(errc::publish_failed) when it cannot confirm them all
    // within its timeout; the bridge then publishes the batch again later.
    virtual void publish(const std::vector<Envelope>& envelopes) = 0;
};

// What the mappers need to know about where changes come from.
struct EnvelopeSource {
    std::string database;  // e.g. "shop"; empty = the connection's database
    std::string table;     // "schema.table"; empty = the collection's table as given
};

// CloudEvents 1.0, JSON structured mode: id = event id, source =
// "/<database>/<schema.table>", type = "changefeed.<operation>" (create,
// replace, delete, clear), time = written_at (RFC 3339, UTC), subject = the
// document id, data = {"current": ..., "previous": ...} as the change carries
// them; datacontenttype application/json, specversion "1.0".  The default
// subject of the envelope (NATS) is empty: the publisher's per-table subject.
Mapper cloudevents_mapper(EnvelopeSource source = {});

// Debezium-compatible change events (the value of the message, schemaless
// JSON): {"before", "after", "op": c|u|d|t|r, "ts_ms", "source": {"connector":
// "changefeed", "db", "schema", "table", "txId", "sequence", "ts_ms",
// "snapshot"}}.  Backfill rows are "r"; a TRUNCATE is one "t" event (from
// range 0: the feed logs a clear in every range), not one per range.
Mapper debezium_mapper(EnvelopeSource source = {});

struct BridgeOptions : AllVersionsOptions {
    BridgeOptions() = default;
    BridgeOptions(AllVersionsOptions o) : AllVersionsOptions(std::move(o)) {}
    // A publisher that fails pauses the range: the batch is published again
    // after a backoff doubling from min to max; nothing is checkpointed meanwhile.
    std::chrono::milliseconds publish_retry_min{std::chrono::milliseconds(100)};
    std::chrono::milliseconds publish_retry_max{std::chrono::seconds(10)};
};

// Counters of a bridge since its start.
struct BridgeStats {
    std::int64_t changes = 0;           // changes mapped
    std::int64_t published = 0;         // envelopes confirmed by the publisher
    std::int64_t filtered = 0;          // changes the mapper mapped to nothing
    std::int64_t publish_failures = 0;  // publish() calls that threw
};

// An all-versions processor whose handler maps and publishes.  The processor's
// options (leases, instances, recovery policy, start positions) apply.
class Bridge {
public:
    // Throws Error(invalid_option) for an empty mapper, and what Processor throws.
    Bridge(Collection collection, std::string name, Mapper mapper, Publisher& publisher, BridgeOptions options = {});
    ~Bridge();
    Bridge(const Bridge&) = delete;
    Bridge& operator=(const Bridge&) = delete;

    void start();
    void stop();
    // The processor's state, but `resuming` while the publisher is failing.
    State state() const;
    BridgeStats stats() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace changefeed
