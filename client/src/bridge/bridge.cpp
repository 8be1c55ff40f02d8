// The bridge's runner: an all-versions processor whose handler maps the batch
// and publishes it.  With a plain Publisher, returning from the handler is
// what checkpoints, so a batch is checkpointed only once the publisher
// confirmed all of it.  With a PipelinedPublisher the handler only sends, and
// the worker asks for the confirmation of everything sent before it stores
// the checkpoints of a read (FeedSettings::before_checkpoint): the batches of
// all ranges are in flight together while the next read runs.
#include <changefeed/bridge.hpp>

#include "core/db.hpp"
#include "processor/pg_processor.hpp"
#include "supervise/consumer_policy.hpp"
#include "supervise/supervised_loop.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>

namespace changefeed {

struct Bridge::Impl {
    Impl(Collection c, Mapper m, Publisher& p, const BridgeOptions& o)
        : collection(std::move(c)), mapper(std::move(m)), publisher(p),
          // Pipelined only where the worker stores the checkpoints (and so
          // asks for the confirmation first): not in manual mode.
          pipelined(o.checkpoint_mode == CheckpointMode::automatic ? dynamic_cast<PipelinedPublisher*>(&p) : nullptr),
          retry_min(o.publish_retry_min), retry_max(o.publish_retry_max) {}

    // The handler: map every change, publish (or send), and on a publisher
    // failure retry with backoff without returning (the instance's reading
    // thread waits; nothing is checkpointed).  A mapper that throws fails
    // the batch before anything of it is published.
    void handle(const std::vector<Change>& batch, const Context& ctx) {
        MapContext mctx;
        static_cast<Context&>(mctx) = ctx;
        mctx.source = source;
        std::vector<Envelope> out;
        std::int64_t filtered = 0;
        try {
            for (const auto& c : batch) {
                auto mapped = mapper(c, mctx);
                if (mapped.empty()) ++filtered;
                for (auto& e : mapped) out.push_back(std::move(e));
            }
        } catch (...) {
            ++mapper_failures;
            throw;  // the processor reports handler_failed and reads the batch again
        }
        changes += static_cast<std::int64_t>(batch.size());
        this->filtered += filtered;
        if (out.empty()) return;
        if (pipelined) return send(std::move(out), ctx);
        bool stopped = false;
        detail::SupervisedLoop loop(retry_min, retry_max,
                                    [&](std::chrono::milliseconds d) { return stopped = wait_or_stop(ctx.stop, d); });
        loop.run([&] { return stopped; },
                 [&] {
                     publisher.publish(out);
                     published += static_cast<std::int64_t>(out.size());
                     failing = false;
                     return false;  // published: done
                 },
                 [&](const Error&, std::exception_ptr p) {
                     ++publish_failures;
                     failing = true;
                     report(ctx.range_id, p);
                     return detail::AfterFailure::back_off;
                 });
        if (stopped) throw Error(errc::publish_failed, "stopped while the publisher was failing");
    }

    // Waits up to `d`; true (at once) when `stop` is requested.
    bool wait_or_stop(std::stop_token stop, std::chrono::milliseconds d) {
        std::unique_lock lock(mu);
        std::stop_callback wake(stop, [&] { cv.notify_all(); });
        return cv.wait_for(lock, d, [&] { return stop.stop_requested(); });
    }

    // Pipelined: sends the batch after what is in flight; a failure sends
    // everything in flight again (in order) until it is confirmed.
    void send(std::vector<Envelope> out, const Context& ctx) {
        if (!resend_needed) {
            try {
                pipelined->send(out);
                in_flight.insert(in_flight.end(), std::make_move_iterator(out.begin()),
                                 std::make_move_iterator(out.end()));
                return;
            } catch (...) {
                failed(ctx.range_id, std::current_exception());
            }
        }
        in_flight.insert(in_flight.end(), std::make_move_iterator(out.begin()), std::make_move_iterator(out.end()));
        if (!resend(ctx.stop)) throw Error(errc::publish_failed, "stopped while the publisher was failing");
    }

    // FeedSettings::before_checkpoint: everything sent is confirmed, or
    // (stopping while the publisher fails) false, and nothing is checkpointed.
    bool settle(std::stop_token stop) {
        if (in_flight.empty()) return true;
        if (!resend_needed) {
            try {
                pipelined->confirm();
                confirmed();
                return true;
            } catch (...) {
                failed(std::nullopt, std::current_exception());
            }
        }
        return resend(stop);
    }

    // Sends everything in flight again and waits for its confirmation, after
    // a backoff, until that succeeds (true) or the processor stops (false).
    bool resend(std::stop_token stop) {
        bool stopped = false;
        detail::SupervisedLoop loop(retry_min, retry_max,
                                    [&](std::chrono::milliseconds d) { return stopped = wait_or_stop(stop, d); });
        loop.back_off();  // the failure that called for the resend
        loop.run([&] { return stopped; },
                 [&] {
                     pipelined->send(in_flight);
                     pipelined->confirm();
                     confirmed();
                     return false;  // confirmed: done
                 },
                 [&](const Error&, std::exception_ptr p) {
                     failed(std::nullopt, p);
                     return detail::AfterFailure::back_off;
                 });
        return !stopped;
    }

    void confirmed() {
        published += static_cast<std::int64_t>(in_flight.size());
        in_flight.clear();
        resend_needed = false;
        failing = false;
    }

    void failed(std::optional<int> range, std::exception_ptr p) {
        ++publish_failures;
        resend_needed = true;
        failing = true;
        report(range, p);
    }

    void report(std::optional<int> range, std::exception_ptr p) {
        Error e(errc::publish_failed, "publish failed");
        try {
            std::rethrow_exception(p);
        } catch (const Error& ex) {
            // A publisher's own publish_failed says it all already.
            e = ex.code() == make_error_code(errc::publish_failed)
                    ? ex
                    : Error(errc::publish_failed, std::string("publish failed: ") + ex.what(), ex.sqlstate());
        } catch (const std::exception& ex) {
            e = Error(errc::publish_failed, std::string("publish failed: ") + ex.what());
        } catch (...) {
        }
        events->report(range, e, p);
    }

    // The source the mappers are told; written by start() before the
    // processor runs, read-only while it does.
    void resolve_source() {
        auto conn = detail::connect(collection.conninfo());
        detail::translated([&] {
            pqxx::read_transaction tx(*conn);
            auto r = tx.exec_params1(
                "SELECT pg_catalog.current_database()::text, n.nspname::text, c.relname::text"
                "  FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
                " WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
                collection.table());
            source = EnvelopeSource{r[0].as<std::string>(), r[1].as<std::string>() + "." + r[2].as<std::string>()};
            events->telemetry().set_collection(source.table, 0);  // the publish failures' table label
        });
        resolved = true;
    }

    Collection collection;
    bool resolved = false;
    EnvelopeSource source;
    Mapper mapper;
    Publisher& publisher;
    PipelinedPublisher* const pipelined;  // the same publisher, when it pipelines
    // Pipelined: what was sent and not confirmed yet, in order, and whether a
    // failure means it must all be sent again.  The worker thread's own.
    std::vector<Envelope> in_flight;
    bool resend_needed = false;
    std::chrono::milliseconds retry_min, retry_max;
    // The processor's on_error, log and metrics, for the publisher's failures.
    std::unique_ptr<detail::ConsumerEvents> events;
    std::atomic<std::int64_t> changes{0}, published{0}, filtered{0}, publish_failures{0}, mapper_failures{0};
    std::atomic<bool> failing{false};
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_ptr<Processor> processor;
};

Bridge::Bridge(Collection collection, std::string name, Mapper mapper, Publisher& publisher, BridgeOptions options) {
    if (!mapper) throw Error(errc::invalid_option, "the bridge's mapper must not be empty");
    if (options.publish_retry_min <= std::chrono::milliseconds(0) ||
        options.publish_retry_max < options.publish_retry_min)
        throw Error(errc::invalid_option, "publish_retry_min must be positive and not above publish_retry_max");
    impl_ = std::make_unique<Impl>(collection, std::move(mapper), publisher, options);
    Impl* impl = impl_.get();
    detail::FeedSettings feed = detail::FeedSettings::of(AllVersionsOptions(static_cast<AllVersionsOptions&>(options)));
    if (impl->pipelined) feed.before_checkpoint = [impl](std::stop_token stop) { return impl->settle(stop); };
    impl_->processor = std::make_unique<Processor>(detail::make_pg_processor(
        std::move(collection), std::move(name),
        Handler([impl](const std::vector<Change>& batch, const Context& ctx) { impl->handle(batch, ctx); }),
        std::move(feed)));
    impl_->events = std::make_unique<detail::ConsumerEvents>(options.on_error, nullptr, nullptr, options.metrics,
                                                             options.log);
    impl_->events->telemetry().set_scope(MetricScope{impl_->collection.table(),
                                                     stored_processor_name(impl_->processor->name(), options.tenant),
                                                     impl_->processor->instance_name()});
}

Bridge::~Bridge() {
    if (impl_) impl_->processor.reset();  // stops before the runner's state goes
}

void Bridge::start() {
    // Once: a second start() while running must not write what handlers read.
    if (!impl_->resolved) impl_->resolve_source();
    impl_->processor->start();
}
void Bridge::stop() { impl_->processor->stop(); }

State Bridge::state() const {
    const State s = impl_->processor->state();
    return s == State::running && impl_->failing ? State::resuming : s;
}

BridgeStats Bridge::stats() const {
    return BridgeStats{impl_->changes.load(), impl_->published.load(), impl_->filtered.load(),
                       impl_->publish_failures.load(), impl_->mapper_failures.load()};
}

}  // namespace changefeed
