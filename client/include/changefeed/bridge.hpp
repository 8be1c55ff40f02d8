// The outbox bridge: each change mapped to an owned envelope (an integration
// event, not the storage schema) and handed to a publisher; the batch is
// checkpointed only after the publisher confirmed every envelope of it.
// Publish then checkpoint: at least once, so consumers deduplicate on the
// envelope's id (the change's event id).  See docs/bridge.md.
//
//   changefeed::NatsPublisher nats({.url = "nats://127.0.0.1:4222"});     // nats_publisher.hpp
//   changefeed::Bridge bridge(orders, "orders-to-nats", changefeed::cloudevents_mapper(), nats);
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
    std::string body;                            // the serialized event
    std::map<std::string, std::string> headers;  // extra transport headers
};

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

// A publisher that pipelines.  The bridge then sends the batches of a read
// (of all its ranges) one after the other without waiting for the broker,
// and waits for the confirmations once, before it stores the batches'
// checkpoints: the next read runs meanwhile.  Checkpoints still follow the
// confirmations of everything before them, and the envelopes keep their ids.
class PipelinedPublisher : public Publisher {
public:
    // Hands `envelopes` over to be published in order after everything sent
    // before, and may return before the broker confirmed them.  Throws
    // Error(errc::publish_failed) when it cannot.
    virtual void send(const std::vector<Envelope>& envelopes) = 0;
    // Returns once the broker confirmed every envelope sent since the last
    // confirm() that returned (at once if none was).  Throws
    // Error(errc::publish_failed) when it cannot confirm them all.
    // After send() or confirm() threw, nothing sent since the last confirm()
    // that returned counts as confirmed (the bridge sends it all again, in
    // order, with the same ids), and nothing of it may reach the broker
    // after what is sent next (NatsPublisher drops its connection).
    virtual void confirm() = 0;
    // send() then confirm().
    void publish(const std::vector<Envelope>& envelopes) override {
        send(envelopes);
        confirm();
    }
};

// Where changes come from, as the envelopes name it.
struct EnvelopeSource {
    std::string database;  // e.g. "shop"
    std::string table;     // "schema.table" (split at its first dot where a format names both)
};

// What a mapper is told about a batch: the processor's Context, and the source
// the bridge resolved at start() (the connection's current_database() and the
// collection's table as "schema.table").
struct MapContext : Context {
    EnvelopeSource source;
};

// Maps one change to the envelopes it publishes: none (filtered out), one, or
// several (each with an id of its own, the same on every redelivery).  A
// mapper that throws fails the batch like a throwing handler: on_error is told
// handler_failed, nothing of the batch is published or checkpointed, and the
// batch is mapped again after retry_delay.  A callable taking `const Context&`
// fits too.
using Mapper = std::function<std::vector<Envelope>(const Change& change, const MapContext& context)>;

// The ready mappers.  Each takes the source from `source` where it is given,
// from MapContext::source otherwise; a table given without a schema throws
// Error(invalid_option) here, a source still unknown when a change is mapped
// (a mapper called outside a bridge without one) throws Error(invalid_option)
// from the mapper.  Envelope::id is the change's event id, Envelope::table
// "schema.table", Envelope::subject empty (the publisher's per-table default).

// CloudEvents 1.0, JSON structured mode (Envelope::content_type
// "application/cloudevents+json"): specversion "1.0", id = event id, source =
// "/<database>/<schema.table>" (each segment percent-encoded outside RFC 3986's
// unreserved characters: "/postgres/public.Order%20Lines"), type = "changefeed.<operation>" (create,
// replace, delete, clear), time = written_at (RFC 3339, UTC, microseconds;
// absent for backfill rows), subject = the document id (absent for a clear
// and for an empty key: CloudEvents forbids an empty subject),
// datacontenttype "application/json", data = {"current": ..., "previous": ...}
// as the change carries them (null when absent), and the extension attribute
// "changefeedrange" (integer): the range, the scope of the ordering.  One
// event per change: a TRUNCATE is one clear per range, each in its range's
// order, and so is a schema change (type "changefeed.schema", with
// BridgeOptions::schema_changes; data.current says what changed, change.hpp).
Mapper cloudevents_mapper(EnvelopeSource source = {});

// Debezium-compatible change events (the value of the message, schemaless
// JSON, as Debezium's PostgreSQL connector writes it with schemas disabled):
// {"before", "after", "op": c|u|d|t|r, "ts_ms" (when mapped), "source":
// {"version", "connector": "changefeed", "name" (the bridge's name), "db",
// "schema", "table" (the names as they are, not encoded), "txId", "sequence" ("[null,\"<seq>\"]"), "ts_ms"
// (written_at), "snapshot" ("true" for backfill rows, else "false")}}.  Backfill
// rows are "r"; a TRUNCATE is one "t" event (from range 0: the feed logs a
// clear in every range; the others are filtered out), not one per range.
// A schema change (BridgeOptions::schema_changes) is one event from range 0
// too, shaped as Debezium's schema change events: {"source", "ts_ms",
// "databaseName", "schemaName", "ddl": null, "tableChanges": [{"type":
// "ALTER", "id": "\"db\".\"schema\".\"table\"", "table":
// {"primaryKeyColumnNames", "columns": [{"name", "typeName", "position"}]}}],
// "changefeed": what changed, as change.hpp describes it}.
Mapper debezium_mapper(EnvelopeSource source = {});

struct BridgeOptions : AllVersionsOptions {
    BridgeOptions() = default;
    BridgeOptions(AllVersionsOptions o) : AllVersionsOptions(std::move(o)) {}
    // A publisher that fails pauses this instance's reading (its ranges share
    // one reading thread; the leases are still renewed): the batch (with a
    // PipelinedPublisher: everything sent and not confirmed yet) is published
    // again after a backoff doubling from min to max, and nothing is
    // checkpointed meanwhile.  on_error is told publish_failed each time.
    std::chrono::milliseconds publish_retry_min{std::chrono::milliseconds(100)};
    std::chrono::milliseconds publish_retry_max{std::chrono::seconds(10)};
};

// Counters of a bridge since its start.
struct BridgeStats {
    std::int64_t changes = 0;           // changes mapped
    std::int64_t published = 0;         // envelopes confirmed by the publisher
    std::int64_t filtered = 0;          // changes the mapper mapped to nothing
    std::int64_t publish_failures = 0;  // publish() (send(), confirm()) calls that threw
    std::int64_t mapper_failures = 0;   // batches the mapper threw on
};

// An all-versions processor whose handler maps and publishes.  The processor's
// options (leases, instances, recovery policy, start positions) apply.  It has
// no backfill (the all-versions feed has none): a bridge starts from its
// start position, and publishes what is written from then on.
class Bridge {
public:
    // Throws Error(invalid_option) for an empty mapper, and what Processor throws.
    Bridge(Collection collection, std::string name, Mapper mapper, Publisher& publisher, BridgeOptions options = {});
    ~Bridge();
    Bridge(const Bridge&) = delete;
    Bridge& operator=(const Bridge&) = delete;

    // Resolves MapContext::source (the connection's current_database() and the
    // table's schema and name; throws what Processor::start throws for a
    // missing table or a failed connection), then starts the processor.
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
