// The NATS JetStream publisher: asynchronous publishes with Nats-Msg-Id
// (send()), and a wait for every acknowledgement of what was sent since the
// last wait (confirm(); publish() is both).
//
// The connection does not reconnect on its own: a connection that broke may
// hold publishes of a failed batch in its reconnect buffer and send them after
// the bridge published the batch again, which could store a later version of
// a document before an earlier one.  So a failed batch drops its connection,
// and the next publish() connects anew.
#include <changefeed/nats_publisher.hpp>

#include <changefeed/error.hpp>

#include "bridge/nats_stream.hpp"

#include <nats/nats.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

namespace changefeed {
namespace {

std::string status_text(natsStatus s) {
    std::string text = natsStatus_GetText(s);
    natsStatus last = NATS_OK;
    const char* detail = nats_GetLastError(&last);
    if (detail && *detail && text.find(detail) == std::string::npos) text += std::string(": ") + detail;
    return text;
}

[[noreturn]] void fail(const std::string& what) { throw Error(errc::publish_failed, "NATS: " + what); }

// A subject token: no separators, wildcards or white space.
std::string token(std::string s) {
    for (auto& c : s)
        if (c == '.' || c == '*' || c == '>' || c == ' ' || c == '\t' || c == '\r' || c == '\n') c = '_';
    return s.empty() ? std::string("_") : s;
}

// A stream name: no dots, wildcards, white space or path separators.
std::string stream_name_part(std::string s) {
    for (auto& c : s)
        if (c == '.' || c == '*' || c == '>' || c == ' ' || c == '\t' || c == '/' || c == '\\' || c == '\r' ||
            c == '\n')
            c = '_';
    return s;
}

// "schema.table" -> {"schema", "table"}; a name without a schema is public's.
std::pair<std::string, std::string> split_table(const std::string& table) {
    auto dot = table.find('.');
    if (dot == std::string::npos) return {"public", table};
    return {table.substr(0, dot), table.substr(dot + 1)};
}

}  // namespace

struct NatsPublisher::Impl {
    explicit Impl(NatsPublisherOptions o) : options(std::move(o)) {}
    ~Impl() { disconnect(); }

    // What the acknowledgement handler counts for what is in flight: the
    // envelopes sent since the last confirm() or failure.
    struct Batch {
        std::int64_t acked = 0, duplicates = 0, failed = 0;
        std::string first_error;
    };

    static void on_ack(jsCtx* ctx, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
        auto* self = static_cast<Impl*>(closure);
        {
            std::lock_guard lock(self->ack_mu);
            if (ctx != self->acking) {
                // A late answer to a context already given up (a failed batch):
                // it must not count for the batch now in flight.
            } else if (pa) {
                ++self->batch.acked;
                ++self->published;
                if (pa->Duplicate) {
                    ++self->batch.duplicates;
                    ++self->duplicates;
                }
            } else {
                ++self->batch.failed;
                if (self->batch.first_error.empty()) {
                    self->batch.first_error = pae && pae->ErrText ? pae->ErrText : "";
                    if (pae) self->batch.first_error += " (" + std::string(natsStatus_GetText(pae->Err)) + ")";
                }
            }
        }
        natsMsg_Destroy(msg);
    }

    void connect() {
        natsOptions* opts = nullptr;
        natsStatus s = natsOptions_Create(&opts);
        if (s == NATS_OK) s = natsOptions_SetURL(opts, options.url.c_str());
        if (s == NATS_OK) s = natsOptions_SetTimeout(opts, options.connect_timeout.count());
        if (s == NATS_OK) s = natsOptions_SetAllowReconnect(opts, false);
        if (s == NATS_OK) s = natsOptions_SetName(opts, "changefeed-bridge");
        if (s == NATS_OK) s = natsConnection_Connect(&nc, opts);
        natsOptions_Destroy(opts);
        if (s != NATS_OK) {
            nc = nullptr;
            fail("cannot connect to " + options.url + ": " + status_text(s));
        }
        jsOptions jo;
        jsOptions_Init(&jo);
        jo.Wait = options.ack_timeout.count();
        jo.PublishAsync.AckHandler = &Impl::on_ack;
        jo.PublishAsync.AckHandlerClosure = this;
        s = natsConnection_JetStream(&js, nc, &jo);
        if (s != NATS_OK) {
            js = nullptr;
            std::string text = status_text(s);
            disconnect();
            fail("no JetStream context: " + text);
        }
        {
            std::lock_guard lock(ack_mu);
            acking = js;
        }
        ensured.clear();  // the server may have restarted without its store
    }

    // Safe in every state the publisher can be left in: not connected,
    // connected without a JetStream context, a context that never published
    // (js_PublishAsyncGetPendingList would crash on it in libnats 3.4), or
    // one with publishes still unacknowledged (jsCtx_Destroy frees those).
    void disconnect() {
        {
            std::lock_guard lock(ack_mu);
            acking = nullptr;
        }
        if (js) {
            jsCtx_Destroy(js);
            js = nullptr;
        }
        if (nc) {
            natsConnection_Destroy(nc);
            nc = nullptr;
        }
    }

    bool connected() const { return nc && natsConnection_Status(nc) == NATS_CONN_STATUS_CONNECTED; }

    std::string table_subject(const std::string& table) const {
        auto [schema, name] = split_table(table);
        return options.subject_prefix + "." + token(schema) + "." + token(name);
    }

    std::string stream_of(const Envelope& e) const {
        if (options.layout == StreamLayout::one_stream) return options.stream;
        auto [schema, name] = split_table(e.table);
        return stream_name_part(options.stream + "_" + schema + "_" + name);
    }

    // Creates the stream unless it exists (or creation is off).
    void ensure_stream(const Envelope& e) {
        if (!options.create_stream) return;
        std::string name = stream_of(e);
        if (ensured.count(name)) return;
        jsStreamInfo* si = nullptr;
        jsErrCode code = static_cast<jsErrCode>(0);
        natsStatus s = js_GetStreamInfo(&si, js, name.c_str(), nullptr, &code);
        if (s == NATS_OK) {
            jsStreamInfo_Destroy(si);
            ensured.insert(name);
            return;
        }
        if (s == NATS_NO_RESPONDERS)
            fail("cannot look up stream " + name + ": the server has no JetStream (not enabled, or not ready yet)");
        if (s != NATS_NOT_FOUND && code != JSStreamNotFoundErr)
            fail("cannot look up stream " + name + ": " + status_text(s));
        std::vector<std::string> subjects;
        if (options.layout == StreamLayout::one_stream) {
            subjects = {options.subject_prefix + ".>"};
        } else {
            std::string base = table_subject(e.table);
            subjects = {base, base + ".>"};
        }
        nats_stream::Config stream(name, std::move(subjects));
        stream.config.Duplicates =
            std::chrono::duration_cast<std::chrono::nanoseconds>(options.duplicate_window).count();
        s = nats_stream::add(js, stream, &code);
        if (s != NATS_OK && code != JSStreamNameExistErr)  // another publisher created it meanwhile
            fail("cannot create stream " + name + ": " + status_text(s));
        ensured.insert(name);
    }

    natsMsg* make_message(const Envelope& e) {
        natsMsg* m = nullptr;
        std::string subject = e.subject.empty() ? table_subject(e.table) : e.subject;
        natsStatus s = natsMsg_Create(&m, subject.c_str(), nullptr, e.body.data(), static_cast<int>(e.body.size()));
        if (s == NATS_OK) s = natsMsgHeader_Set(m, "Nats-Msg-Id", e.id.c_str());
        if (s == NATS_OK && !e.content_type.empty()) s = natsMsgHeader_Set(m, "Content-Type", e.content_type.c_str());
        for (const auto& [k, v] : e.headers)
            if (s == NATS_OK) s = natsMsgHeader_Set(m, k.c_str(), v.c_str());
        if (s != NATS_OK) {
            natsMsg_Destroy(m);
            fail("cannot build the message of " + e.id + ": " + status_text(s));
        }
        return m;
    }

    void send(const std::vector<Envelope>& envelopes) {
        for (const auto& e : envelopes) {
            if (e.id.empty())
                throw Error(errc::publish_failed, "NATS: an envelope without an id cannot be deduplicated");
            if (e.subject.empty() && e.table.empty())
                throw Error(errc::publish_failed, "NATS: an envelope with neither a subject nor a table");
        }
        if (!connected()) {
            disconnect();
            connect();
        }
        for (const auto& e : envelopes) ensure_stream(e);
        if (in_flight == 0) {
            std::lock_guard lock(ack_mu);
            batch = Batch{};
        }
        for (const auto& e : envelopes) {
            natsMsg* m = make_message(e);
            natsStatus s = js_PublishMsgAsync(js, &m, nullptr);
            natsMsg_Destroy(m);  // a no-op once the library took it
            if (s != NATS_OK) fail("cannot publish " + e.id + ": " + status_text(s));
            ++in_flight;
        }
    }

    void confirm() {
        if (in_flight == 0) return;
        // Wait in short steps, so that a connection that closed fails at
        // once instead of after the whole timeout.  The timeout counts from
        // the last acknowledgement that came: a long pipeline is not cut
        // off while its acknowledgements keep coming.
        auto deadline = std::chrono::steady_clock::now() + options.ack_timeout;
        std::int64_t answered = -1;
        for (;;) {
            jsPubOptions po;
            jsPubOptions_Init(&po);
            po.MaxWait = 50;
            natsStatus s = js_PublishAsyncComplete(js, &po);
            if (s == NATS_OK) break;
            if (s != NATS_TIMEOUT) fail("waiting for acknowledgements: " + status_text(s));
            if (natsConnection_IsClosed(nc)) fail("the connection closed before every envelope was acknowledged");
            const auto now = std::chrono::steady_clock::now();
            {
                std::lock_guard lock(ack_mu);
                if (batch.acked + batch.failed != answered) {
                    answered = batch.acked + batch.failed;
                    deadline = now + options.ack_timeout;
                }
            }
            if (now >= deadline)
                fail("acknowledgements missing after " + std::to_string(options.ack_timeout.count()) + " ms");
        }
        std::lock_guard lock(ack_mu);
        const std::int64_t sent = in_flight;
        in_flight = 0;
        if (batch.failed > 0)
            fail(std::to_string(batch.failed) + " of " + std::to_string(sent) +
                 " envelopes refused: " + batch.first_error);
        if (batch.acked != sent)
            fail("only " + std::to_string(batch.acked) + " of " + std::to_string(sent) + " envelopes acknowledged");
    }

    NatsPublisherOptions options;
    std::mutex publish_mu;       // one call at a time: the acknowledgements are counted for what is in flight
    std::int64_t in_flight = 0;  // envelopes sent since the last confirm() or failure (under publish_mu)
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    std::set<std::string> ensured;
    std::mutex ack_mu;
    jsCtx* acking = nullptr;  // the context whose acknowledgements count (under ack_mu)
    Batch batch;
    std::atomic<std::int64_t> published{0}, duplicates{0}, failures{0};
};

NatsPublisher::NatsPublisher(NatsPublisherOptions options) {
    auto bad = [](const std::string& what) { throw Error(errc::invalid_option, "NatsPublisher: " + what); };
    if (options.url.empty()) bad("url must not be empty");
    if (options.subject_prefix.empty()) bad("subject_prefix must not be empty");
    if (options.subject_prefix.find_first_of("*> \t\r\n") != std::string::npos ||
        options.subject_prefix.front() == '.' || options.subject_prefix.back() == '.')
        bad("subject_prefix must be a subject without wildcards or spaces: " + options.subject_prefix);
    if (options.stream.empty()) bad("stream must not be empty");
    if (options.stream.find_first_of(".*> \t\r\n/\\") != std::string::npos)
        bad("stream must be a stream name (no dots, wildcards, spaces or slashes): " + options.stream);
    if (options.duplicate_window <= std::chrono::milliseconds(0)) bad("duplicate_window must be positive");
    if (options.ack_timeout <= std::chrono::milliseconds(0)) bad("ack_timeout must be positive");
    if (options.connect_timeout <= std::chrono::milliseconds(0)) bad("connect_timeout must be positive");
    impl_ = std::make_unique<Impl>(std::move(options));
}

NatsPublisher::~NatsPublisher() = default;

// A failure drops the connection with whatever it still buffered, and what
// was in flight with it.
template <class F>
void NatsPublisher::guarded(F&& f) {
    std::lock_guard lock(impl_->publish_mu);
    try {
        f();
    } catch (...) {
        ++impl_->failures;
        impl_->in_flight = 0;
        impl_->disconnect();
        throw;
    }
}

void NatsPublisher::send(const std::vector<Envelope>& envelopes) {
    if (envelopes.empty()) return;
    guarded([&] { impl_->send(envelopes); });
}

void NatsPublisher::confirm() {
    guarded([&] { impl_->confirm(); });
}

void NatsPublisher::publish(const std::vector<Envelope>& envelopes) {
    guarded([&] {
        if (!envelopes.empty()) impl_->send(envelopes);
        impl_->confirm();
    });
}

std::int64_t NatsPublisher::published() const { return impl_->published.load(); }
std::int64_t NatsPublisher::duplicates() const { return impl_->duplicates.load(); }
std::int64_t NatsPublisher::failures() const { return impl_->failures.load(); }

std::string NatsPublisher::subject_for(const Envelope& envelope) const {
    return envelope.subject.empty() ? impl_->table_subject(envelope.table) : envelope.subject;
}

std::string NatsPublisher::stream_for(const Envelope& envelope) const { return impl_->stream_of(envelope); }

}  // namespace changefeed
