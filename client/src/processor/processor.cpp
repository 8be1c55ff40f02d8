// The PostgreSQL processor: validation, start and stop, and its state.  It
// runs two threads, each with its own connection, and a third where needed:
//   lease thread   the LeaseKeeper: acquires, balances and renews the leases,
//                  stores the worker's checkpoints; releases them on stop
//   worker thread  the RangeWorker: reads the owned ranges (a caught-up read
//                  waits in the server for the next commit: the wake-up),
//                  calls the handler
//   listener       only where that long poll is not available or not used:
//                  LISTENs and wakes the worker (the poll interval covers
//                  lost wake-ups)
// A connection error in any of them is answered by reconnecting with backoff;
// the worker then reloads its ranges from the stored checkpoints (resuming).
#include <changefeed/history.hpp>
#include <changefeed/processor.hpp>

#include "core/connection_string.hpp"
#include "core/db.hpp"
#include "core/names.hpp"
#include "deliver/projection_policy.hpp"
#include "deliver/range_worker.hpp"
#include "lease/lease_keeper.hpp"
#include "processor/listener.hpp"
#include "processor/pg_processor.hpp"
#include "processor/processor_impl.hpp"
#include "read/feed_mode.hpp"
#include "read/feed_reader.hpp"
#include "supervise/consumer_policy.hpp"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

namespace changefeed {
namespace detail {
namespace {

// A new one at each start: the name registered with it is this start's own.
std::string new_token() {
    std::random_device rd;
    char buf[40];
    std::snprintf(buf, sizeof buf, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
    return buf;
}

class PgProcessor final : public ProcessorImpl {
public:
    PgProcessor(Collection c, std::string n, ProcessorHandler h, FeedSettings feed)
        : collection_(std::move(c)), name_(std::move(n)), handler_(std::move(h)), feed_(std::move(feed)),
          events_(feed_.common.on_error, feed_.common.on_state_change, feed_.common.recovery, feed_.common.metrics,
                  feed_.common.log) {
        const ProcessorOptions& opt = feed_.common;
        stored_name_ = stored_processor_name(name_, opt.tenant);
        check_processor_name(name_, stored_name_);
        check_handler(handler_, opt);
        default_name_ = opt.instance_name.empty();
        instance_ = default_name_ ? default_instance_name() : opt.instance_name;
        check_instance_name(instance_);
        using std::chrono::milliseconds;
        if (opt.lease_duration <= milliseconds(0) || opt.renew_interval <= milliseconds(0) ||
            opt.acquire_interval <= milliseconds(0) || opt.poll_interval <= milliseconds(0) ||
            opt.retry_delay < milliseconds(0) || opt.reconnect_min <= milliseconds(0) ||
            opt.reconnect_max < opt.reconnect_min || opt.maintain_interval < milliseconds(0))
            throw Error(errc::invalid_option, "intervals must be positive");
        if (opt.renew_interval >= opt.lease_duration)
            throw Error(errc::invalid_option, "renew_interval must be shorter than lease_duration");
        if (opt.max_batch_size < 1 || opt.max_batch_size > 100000)
            throw Error(errc::invalid_option, "max_batch_size must be between 1 and 100000");
        if (opt.max_read_size < 1 || opt.max_read_size > 100000)
            throw Error(errc::invalid_option, "max_read_size must be between 1 and 100000");
        if (int(feed_.start_from_beginning) + int(opt.start_time.has_value()) + int(!opt.start_position.empty()) > 1)
            throw Error(errc::invalid_option,
                        "at most one of start_from_beginning, start_time and start_position may be set");
        key_ = {collection_.table(), stored_name_, instance_};
        events_.telemetry().set_scope(MetricScope{collection_.table(), stored_name_, instance_});
    }

    ~PgProcessor() override { stop(); }

    void start() override {
        std::lock_guard guard(start_mu_);
        if (started_) throw Error(errc::already_started, "processor \"" + name_ + "\" is already started");
        events_.set_state(State::starting);
        const ProcessorOptions& opt = feed_.common;
        std::unique_ptr<pqxx::connection> conn;
        std::string token;
        WorkerSetup setup(collection_);
        try {
            setup.info = collection_.describe();
            if (!opt.tenant.empty() && !setup.info.tenant_column)
                throw Error(errc::invalid_option, "the tenant option needs a collection with a tenant column; " +
                                                      collection_.table() +
                                                      " has none (changefeed.enable(..., tenant_column => ...))");
            if (!opt.tenant.empty()) {
                setup.scope.tenant = opt.tenant;
                setup.scope.tenant_column = *setup.info.tenant_column;
                setup.scope.strip_partition_prefix = setup.info.partition_key.size() > 1 &&
                                                     setup.info.partition_key[0] == *setup.info.tenant_column;
            }
            conn = connect(collection_.conninfo());
            require_primary(*conn);
            // Refused reads fail here, before lease_init files the name under this role.
            probe_read(*conn, collection_.table(), opt.tenant, feed_.mode);
            // The standby to read from: reachable and readable, now rather than at the first read.
            if (!opt.read_connection.empty())
                probe_read(*connect(opt.read_connection), collection_.table(), opt.tenant, feed_.mode);
            translated([&] {
                pqxx::nontransaction tx(*conn);
                tx.exec("SELECT changefeed.ensure_notifier()");
            });
            StartAt start_at;
            start_at.from_beginning = feed_.start_from_beginning && feed_.mode == FeedMode::latest_version;
            start_at.time = opt.start_time;
            start_at.position = opt.start_position;
            init_leases(*conn, key_, start_at);
            // Last: a start refused from here on leaves no registration behind.
            token = new_token();
            if (default_name_) claim_default_name(*conn, setup.info.schema_table, token);
            else register_instance(*conn, key_, token, opt.lease_duration);
        } catch (...) {
            release_default_name();
            events_.set_state(State::stopped);
            throw to_error(std::current_exception());
        }
        setup.feed = &feed_;
        setup.handler = &handler_;
        if (shape_of(handler_) == HandlerShape::projector) {
            auto counters = std::make_shared<ProjectionCounters>(opt.duplicate_alert_share, opt.duplicate_alert_window);
            std::atomic_store(&counters_, counters);
            setup.counters = std::move(counters);
        }
        setup.name = name_;
        setup.stored_name = stored_name_;
        setup.instance = instance_;
        setup.key = key_;
        setup.listen = [this] { start_listener(); };
        const std::string channel = setup.info.channel;
        const std::string setup_table = setup.info.schema_table;
        const int setup_ranges = setup.info.ranges;

        // The worker exists before the keeper, whose hooks wake or stop it.
        {
            std::lock_guard guard(threads_mu_);
            leases_.reset();
            worker_.reset();
            auto keeper = std::make_unique<LeaseKeeper>(collection_.conninfo(), key_, token, opt, events_,
                                                        LeaseKeeper::Hooks{[this] { worker_->leases_changed(); },
                                                                           [this] { worker_->request_stop(); }});
            worker_ = std::make_unique<RangeWorker>(std::move(setup), events_, *keeper);
            leases_ = std::move(keeper);
            listener_.reset();
            channel_ = channel;
        }
        events_.telemetry().set_collection(setup_table, setup_ranges);
        events_.telemetry().log(LogLevel::info, LogEvent::started);
        // Reading a standby, or told not to wait in the server: wake-ups come by LISTEN.
        if (!opt.long_poll || !opt.read_connection.empty()) start_listener();
        leases_->start(std::move(conn));
        worker_thread_ = std::jthread([this] {
            worker_->run();
            // Destroyed from inside the handler: this thread is the last owner.
            if (std::unique_ptr<ProcessorImpl> self = std::move(disposed_self_)) {
                finish_stop();
                // `self` frees this processor here; nothing of it is touched after.
            }
        });
        started_ = true;
    }

    void stop() override {
        if (on_handler_thread()) {
            // Called from the handler: joining ourselves would deadlock, so only
            // ask; the destructor (or a later stop()) finishes the job.
            worker_->request_stop();
            leases_->stop_acquiring();
            return;
        }
        std::lock_guard guard(start_mu_);
        if (!started_) return;
        worker_->request_stop();
        leases_->stop_acquiring();
        worker_thread_.join();
        finish_stop();
    }

    bool on_handler_thread() const override { return std::this_thread::get_id() == worker_thread_.get_id(); }

    void dispose_from_handler(std::unique_ptr<ProcessorImpl> self) override {
        disposed_self_ = std::move(self);
        worker_->request_stop();
        leases_->stop_acquiring();
        // The thread ends on its own once the handler returned, and frees us.
        worker_thread_.detach();
    }

    State current_state() const override { return events_.state(); }
    ProjectionStats projection_stats() const override {
        auto counters = std::atomic_load(&counters_);
        return counters ? counters->stats() : ProjectionStats{};
    }
    const std::string& processor_name() const override { return name_; }
    const std::string& instance_name() const override { return instance_; }
    void wait_for(const std::string& position, std::chrono::milliseconds timeout) const override {
        wait_for_checkpoints(collection_, stored_name_, position, timeout);
    }

    std::string current_position() const override { return changefeed::current_position(collection_); }

    std::vector<int> owned_ranges() const override {
        std::lock_guard guard(threads_mu_);
        return leases_ ? leases_->owned_ranges() : std::vector<int>{};
    }

private:
    // The default name: "<host>-<n>", n the lowest slot that neither another
    // processor object of this process (which may share our lease session,
    // where the server cannot tell us apart) nor a live session holds.  A
    // slot whose holder died is free again, and with it its leases.
    void claim_default_name(pqxx::connection& conn, const std::string& table, const std::string& token) {
        const std::string host = default_instance_name();
        auto& local = LocalInstanceNames::process();
        for (int slot = 1;; ++slot) {
            const std::string candidate = host + "-" + std::to_string(slot);
            if (!local.claim(table, stored_name_, candidate)) continue;
            key_.instance = candidate;
            try {
                register_instance(conn, key_, token, feed_.common.lease_duration);
            } catch (...) {
                local.release(table, stored_name_, candidate);
                key_.instance = instance_;
                const bool taken = to_error(std::current_exception()).code() ==
                                   make_error_code(errc::instance_name_in_use);
                if (taken && slot < 1000) continue;
                throw;
            }
            claimed_ = {table, candidate};
            instance_ = candidate;
            events_.telemetry().set_scope(MetricScope{collection_.table(), stored_name_, instance_});
            return;
        }
    }

    void release_default_name() {
        if (!claimed_) return;
        LocalInstanceNames::process().release(claimed_->first, stored_name_, claimed_->second);
        claimed_.reset();
    }

    // LISTENs on the collection's channel for the worker, once per start.
    // Not through a transaction pooler: a LISTEN would stay on a server
    // session other clients are handed, and hear nothing for us; the reader
    // polls there (at poll_interval) where the long poll is not to be had.
    void start_listener() {
        std::lock_guard guard(threads_mu_);
        if (listener_ || through_transaction_pooler(collection_.conninfo())) return;
        const ProcessorOptions& opt = feed_.common;
        listener_ = std::make_unique<Listener>(
            collection_.conninfo(), channel_, [this] { worker_->wake(); }, opt.reconnect_min, opt.reconnect_max,
            &events_.telemetry());
        listener_->start();
    }

    // After the worker ended: only now release the leases, the worker's last
    // checkpoint being stored.
    void finish_stop() {
        leases_->release();
        std::unique_ptr<Listener> listener;
        {
            std::lock_guard guard(threads_mu_);
            listener = std::move(listener_);
        }
        if (listener) listener->stop();
        release_default_name();  // unregistered by release() above
        started_ = false;
        if (events_.state() != State::history_lost) events_.set_state(State::stopped);
        events_.telemetry().log(LogLevel::info, LogEvent::stopped);
    }

    const Collection collection_;
    const std::string name_;
    const ProcessorHandler handler_;
    std::shared_ptr<ProjectionCounters> counters_;  // a projector's, since its last start
    const FeedSettings feed_;
    std::string instance_;
    bool default_name_ = false;  // no instance name given: a slot is claimed at start()
    std::optional<std::pair<std::string, std::string>> claimed_;  // (table, instance) of LocalInstanceNames
    std::string stored_name_;  // the name on the server: with the tenant prefix, if any
    LeaseKey key_;
    ConsumerEvents events_;

    std::mutex start_mu_;  // serializes start() and stop()
    bool started_ = false;
    mutable std::mutex threads_mu_;  // guards the keeper's replacement against owned_ranges()
    std::unique_ptr<LeaseKeeper> leases_;
    std::unique_ptr<RangeWorker> worker_;
    std::unique_ptr<Listener> listener_;  // started where the long poll does not wake the worker
    std::string channel_;
    std::unique_ptr<ProcessorImpl> disposed_self_;  // set when destroyed from the handler
    std::jthread worker_thread_;
};

}  // namespace
}  // namespace detail

Processor detail::make_pg_processor(Collection collection, std::string name, ProcessorHandler handler,
                                    FeedSettings feed) {
    return processor_of(std::make_unique<PgProcessor>(std::move(collection), std::move(name), std::move(handler),
                                                      std::move(feed)));
}

Processor make_processor(Collection collection, std::string name, ProcessorHandler handler, FeedOptions options) {
    return detail::make_pg_processor(std::move(collection), std::move(name), std::move(handler),
                                     detail::FeedSettings::of(options));
}

Processor detail::processor_of(std::unique_ptr<ProcessorImpl> impl) { return Processor(std::move(impl)); }

void detail::DisposeProcessor::operator()(ProcessorImpl* impl) const noexcept {
    std::unique_ptr<ProcessorImpl> owned(impl);
    if (impl->on_handler_thread()) impl->dispose_from_handler(std::move(owned));
}

Processor::Processor(std::unique_ptr<detail::ProcessorImpl> impl) : impl_(impl.release()) {}
Processor::~Processor() = default;
Processor::Processor(Processor&&) noexcept = default;
Processor& Processor::operator=(Processor&&) noexcept = default;

void Processor::start() { impl_->start(); }
void Processor::stop() {
    if (impl_) impl_->stop();
}
State Processor::state() const { return impl_->current_state(); }
const std::string& Processor::name() const { return impl_->processor_name(); }
const std::string& Processor::instance_name() const { return impl_->instance_name(); }
std::vector<int> Processor::owned_ranges() const { return impl_->owned_ranges(); }
ProjectionStats Processor::projection_stats() const { return impl_->projection_stats(); }
namespace detail {

// changefeed.wait_for() on a connection of its own, as long as it takes, in
// calls of at most 10 s: a statement's snapshot holds vacuum back for as long
// as it runs, and a caller may wait up to an hour.
void wait_for_checkpoints(const Collection& collection, const std::string& stored_name, const std::string& position,
                          std::chrono::milliseconds timeout) {
    using std::chrono::milliseconds;
    if (timeout.count() < 0 || timeout > std::chrono::hours(1))
        throw Error(errc::invalid_option, "the timeout of wait_for must be between 0 and 1 hour");
    auto conn = connect(collection.conninfo());
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const milliseconds left = std::max(
            milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now()));
        const milliseconds slice = std::min(left, milliseconds(10000));
        try {
            translated([&] {
                pqxx::nontransaction tx(*conn);
                tx.exec_params(
                    "SELECT changefeed.wait_for($1::regclass, $2, $3, make_interval(secs => $4::float8 / 1000))",
                    collection.table(), stored_name, position, static_cast<double>(slice.count()));
            });
            return;
        } catch (const Error& e) {
            if (e.code() != make_error_code(errc::wait_timed_out) || slice == left) throw;
        }
    }
}

}  // namespace detail

void wait_for(const Collection& collection, const std::string& processor, const std::string& position,
              std::chrono::milliseconds timeout, const std::string& tenant) {
    detail::check_processor_name(processor, stored_processor_name(processor, tenant));
    detail::wait_for_checkpoints(collection, stored_processor_name(processor, tenant), position, timeout);
}

void Processor::wait_for(const std::string& position, std::chrono::milliseconds timeout) const {
    impl_->wait_for(position, timeout);
}
void Processor::wait_until_caught_up(std::chrono::milliseconds timeout) const {
    impl_->wait_for(impl_->current_position(), timeout);
}

}  // namespace changefeed
