// The bridge's NATS JetStream publisher (library changefeed::nats).
//
//   changefeed::NatsPublisher nats({.url = "nats://127.0.0.1:4222", .subject_prefix = "shop"});
//   changefeed::Bridge bridge(orders, "orders-to-nats", mapper, nats);
//
// Every envelope is published to JetStream with the header Nats-Msg-Id = its
// id, so the stream's duplicate window drops a redelivered envelope (the
// bridge publishes a batch again after a crash or a failed publish).
// publish() returns only once the server acknowledged every envelope of the
// batch (stored, or recognized as a duplicate); otherwise it throws
// Error(errc::publish_failed) and the bridge publishes the batch again later.
// It pipelines (PipelinedPublisher): the bridge send()s the batches of a
// read and confirm()s them once, before their checkpoints.
// See docs/bridge-nats.md.
#pragma once

#include <changefeed/bridge.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace changefeed {

// Which JetStream streams hold the subjects the publisher sends to.
enum class StreamLayout {
    // One stream named `stream`, subjects "<subject_prefix>.>".
    one_stream,
    // A stream per table, "<stream>_<schema>_<table>", subjects
    // "<subject_prefix>.<schema>.<table>" and "<subject_prefix>.<schema>.<table>.>".
    stream_per_table,
};

struct NatsPublisherOptions {
    std::string url = "nats://127.0.0.1:4222";
    // An envelope without a subject goes to "<subject_prefix>.<schema>.<table>".
    std::string subject_prefix = "changefeed";
    StreamLayout layout = StreamLayout::one_stream;
    // The stream's name (one_stream), or the prefix of the streams' names (stream_per_table).
    std::string stream = "CHANGEFEED";
    // Create a missing stream (file storage, duplicate_window); an existing
    // stream is used as it is.  false: the streams must exist.
    bool create_stream = true;
    // The created streams' duplicate window: a Nats-Msg-Id seen within it is
    // acknowledged as a duplicate and not stored again.  Make it longer than
    // the longest outage after which the bridge may republish a batch.
    std::chrono::milliseconds duplicate_window{std::chrono::minutes(2)};
    // How long publish() (confirm()) waits for the next acknowledgement of
    // what is in flight: the wait goes on while acknowledgements keep coming.
    std::chrono::milliseconds ack_timeout{std::chrono::seconds(5)};
    // How long a connection attempt may take.
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(2)};
};

class NatsPublisher : public PipelinedPublisher {
public:
    // Does not connect (publish() connects): a broker that is down does not
    // fail construction.  Throws Error(invalid_option) for an empty url,
    // subject prefix or stream name, a prefix with wildcards or spaces, or a
    // non-positive window or timeout.
    explicit NatsPublisher(NatsPublisherOptions options = {});
    ~NatsPublisher() override;
    NatsPublisher(const NatsPublisher&) = delete;
    NatsPublisher& operator=(const NatsPublisher&) = delete;

    // Publishes the envelopes asynchronously in order, then waits for every
    // acknowledgement (of these and of what send() sent before).  Throws
    // Error(publish_failed) when not connected and the connection cannot be
    // made, when a stream cannot be created, when the server refuses an
    // envelope, or when acknowledgements are missing after ack_timeout.
    // After a failure the connection is dropped (with whatever it still
    // buffered, and what was in flight) and the next call connects anew, so
    // that nothing of a failed batch reaches the server after the batch is
    // retried.  Calls (of these three) are serialized.
    void publish(const std::vector<Envelope>& envelopes) override;
    // publish() in two halves: send() connects if need be and publishes
    // asynchronously (the errors of the connection and the streams);
    // confirm() waits for the acknowledgements of everything sent since the
    // last confirm() or failure (the refusals and timeouts).
    void send(const std::vector<Envelope>& envelopes) override;
    void confirm() override;

    // Envelopes the server acknowledged (stored or duplicate) since construction.
    std::int64_t published() const;
    // Of those, the acknowledgements flagged duplicate: the duplicate window
    // recognized the Nats-Msg-Id and did not store the envelope again.
    std::int64_t duplicates() const;
    // publish(), send() and confirm() calls that threw.
    std::int64_t failures() const;

    // Where an envelope goes: its subject, or the table's default subject.
    std::string subject_for(const Envelope& envelope) const;
    // The stream that holds `subject_for(envelope)` under this layout.
    std::string stream_for(const Envelope& envelope) const;

private:
    template <class F>
    void guarded(F&& f);
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace changefeed
