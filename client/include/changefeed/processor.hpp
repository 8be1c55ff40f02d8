// Change-feed processors: leased, checkpointed readers of a collection's feed.
//
//   auto p = changefeed::make_processor(collection, "billing-projection",
//       [](const std::vector<changefeed::Change>& batch, const changefeed::Context& ctx) { ... });
//   p.start();  // nothing is read before this
//   ...
//   p.stop();   // or let the destructor do it; releases the leases at once
//
// Delivery is at least once: a batch is checkpointed only after the handler
// returned, and a handler that throws gets the same changes again.
#pragma once

#include <changefeed/change.hpp>
#include <changefeed/collection.hpp>
#include <changefeed/error.hpp>
#include <changefeed/log.hpp>
#include <changefeed/metrics.hpp>
#include <changefeed/projection.hpp>
#include <changefeed/recovery.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <system_error>
#include <utility>
#include <variant>
#include <vector>

namespace changefeed {

// What the handler is told about a batch.
struct Context {
    int range_id = 0;          // the range the batch comes from: the scope of the ordering
    std::string processor;     // the processor name as given (without the tenant prefix)
    std::string instance;      // this instance's name
    std::int64_t lease_epoch = 0;  // always 1 on the in-memory provider (no leases)
    // The range as text: the range id on PostgreSQL; on the in-memory provider
    // the partition key value (components joined by '/'), whose range_id is
    // a number given in order of first appearance.
    std::string range;
    // The position after this batch: what an automatic checkpoint stores,
    // what a manual one may store (see CheckpointMode).  Empty for a backfill page.
    std::string position;
    // CheckpointMode::manual only (empty otherwise): stores `position` as the
    // range's checkpoint (for a backfill page: the scan's progress), fenced
    // by the lease at the batch's epoch (Error(lease_lost) if the range
    // changed hands).  Callable from any thread, during or after the handler,
    // while the processor runs, on a connection of its own; a position older
    // than one this instance already stored for the range is ignored.
    std::function<void()> checkpoint;
    // Signalled when the processor (or the subscription) stops: a long
    // handler returns early, and its batch is delivered again.
    std::stop_token stop;
};

// A failure reported to on_error.  The processor keeps running after it,
// except for history_lost: the range concerned halts (its lease is kept, no
// further changes of it are delivered) and the processor's state becomes
// history_lost; the message is the runbook (docs/runbooks/history-lost.md).
// Other ranges go on.  With the `resync` option the range is re-read from the
// table instead, and the processor stays running.
struct ErrorInfo {
    std::optional<int> range_id;  // the range concerned, if any
    std::error_code code;         // an errc value
    std::string message;
    std::exception_ptr exception; // the exception thrown (handler's or the library's)
    // Set when the recovery policy halted something over this failure:
    // runbook_path() of the decision's runbook.
    std::string runbook;
};

// Progress of a start_from_beginning backfill of one range.
struct BackfillProgress {
    int range_id = 0;
    std::int64_t rows_done = 0;        // rows of the range delivered so far
    std::int64_t estimated_total = 0;  // estimate of the range's rows (table estimate / ranges)
    bool done = false;
};

// When checkpoints are stored.
enum class CheckpointMode {
    automatic,  // after each batch the handler returned from (a projector's batch, a transactional handler's commit)
    manual,     // only when the handler (or the service, later) calls Context::checkpoint; Handler only
};

// The handler shapes all take the Context last: Handler(batch, context),
// Projector(change, context), TransactionalHandler(batch, transaction, context)
// (projection.hpp), and a subscription's ChangeCallback(change, context).
using Handler = std::function<void(const std::vector<Change>& batch, const Context& context)>;

// What a processor runs: one of the three shapes.  A lambda converts to the
// shape its parameters say (a generic lambda fits several: give it a type).
using ProcessorHandler = std::variant<Handler, Projector, TransactionalHandler>;

// What every processor takes, whichever its feed.  A processor is given
// LatestVersionOptions or AllVersionsOptions, which say the feed: the options
// of one feed do not exist on the other, so setting them is a compile error.
struct ProcessorOptions {
    // Unique among the live instances of one processor: starting a second
    // instance under a name that is live fails (instance_name_in_use).
    // Empty = default_instance_name(), unique per process.
    std::string instance_name;
    // Multi-tenancy: read only this tenant's changes (the
    // collection needs a tenant column), under a lease set of the tenant's own
    // -- the name stored on the server is stored_processor_name(name, tenant),
    // "<tenant>/<name>" -- with partition keys that carry no tenant prefix.
    // Empty: not scoped (a role bound to a tenant still reads only its
    // tenant's changes).  Refused by the in-memory provider (invalid_option).
    std::string tenant;
    // A lease not renewed for this long is taken over by another instance.
    std::chrono::milliseconds lease_duration{std::chrono::seconds(30)};
    // Renew well inside the duration, so that a slow round trip does not lose leases.
    std::chrono::milliseconds renew_interval{std::chrono::seconds(10)};
    // How often to look for free, expired or unbalanced leases.
    std::chrono::milliseconds acquire_interval{std::chrono::seconds(5)};
    // Fallback read interval when no notification arrives.
    std::chrono::milliseconds poll_interval{std::chrono::seconds(5)};
    // Delay before a batch whose handler threw is read again.
    std::chrono::milliseconds retry_delay{std::chrono::seconds(1)};
    // Reconnect backoff: doubles from min up to max.
    std::chrono::milliseconds reconnect_min{std::chrono::milliseconds(100)};
    std::chrono::milliseconds reconnect_max{std::chrono::seconds(10)};
    // While idle, how often the advancing position is stored as checkpoint.
    std::chrono::milliseconds idle_checkpoint_interval{std::chrono::seconds(30)};
    // Most changes per handler call.
    int max_batch_size = 100;
    // Most changes one read of the log fetches for all the ranges an instance
    // owns (at least max_batch_size per range, up to 16 ranges, at most
    // 100000); a range's share is handed over in batches of max_batch_size.
    int max_read_size = 10000;
    // While the handler runs, read the next changes on a connection of its
    // own (one more connection per processor): the handler's time and the
    // read's overlap.  Used when a read came back full.
    bool read_ahead = true;
    // Read scale-out: a libpq connection string of a standby (a hot standby
    // of the collection's primary) the feed is read from, while leases,
    // checkpoints, backfills and maintenance stay on the collection's
    // connection, which must be the primary.  A standby's snapshot is a
    // valid position on the primary, so nothing is skipped; a standby that
    // lags only delays (a position it has not replayed yet is read again
    // later).  A lost history is confirmed on the primary, which then reads
    // that range.  Empty: everything on the collection's connection.
    // Several standbys: "host=s1,s2 target_session_attrs=prefer-standby".
    // Refused by the in-memory provider (invalid_option).
    std::string read_connection;
    // How often the processor runs changefeed.maintain() (partitions ahead,
    // retention, TTL): at start, then at this interval.  Zero: never (use the
    // preloaded worker or cron).  maintain() runs one at a time cluster-wide;
    // a busy one is skipped.  Its failures never stop reading; a role not allowed
    // to run it (42501) is told once through on_error, then ignored.
    std::chrono::milliseconds maintain_interval{std::chrono::minutes(5)};

    // Where a processor without checkpoints starts (a checkpoint always wins;
    // at most one of these and start_from_beginning, else invalid_option);
    // none = now.
    // start_time: the first change written at or after it (written_at), and
    // perhaps some written shortly before; history_lost from start() if
    // retention dropped changes written after it.  Never silently "now".
    std::optional<std::chrono::system_clock::time_point> start_time;
    // start_position: a position (read()'s, a Context::position,
    // changefeed.position_at()); malformed_position, foreign_position or
    // history_lost from start().
    std::string start_position;
    CheckpointMode checkpoint_mode = CheckpointMode::automatic;
    // Empty: default_recovery.
    RecoveryPolicy recovery;
    // Projector processors: on_error is told duplicates_rising when more than
    // this share of the last duplicate_alert_window changes were skipped as
    // duplicates (once per crossing; told again after it fell below).
    double duplicate_alert_share = 0.5;
    int duplicate_alert_window = 1000;

    // Every failure is also logged (see `log`): without on_error it is still seen.
    std::function<void(const ErrorInfo&)> on_error;
    std::function<void(State)> on_state_change;
    std::function<void(const BackfillProgress&)> on_backfill_progress;
    // A lease was taken (at start, from a free or expired lease, or by
    // balancing) / given up (stop, balancing, or taken over by another
    // instance).  Called on the processor's threads (the lease thread, the
    // reading thread when it finds a lease lost, the thread that stops it);
    // must not block.  What they throw is ignored.
    std::function<void(int range_id)> on_lease_acquired;
    std::function<void(int range_id)> on_lease_released;

    // Measurements per range (metrics.hpp): InProcessMetrics, the Prometheus
    // exposition (changefeed::prometheus), or your own.  Null: nothing is
    // measured (a null check is all it costs).
    std::shared_ptr<Metrics> metrics;
    // Where the log records go (log.hpp): started, leases acquired, released
    // and lost, connections lost and back, failures, halts, stopped.  Empty:
    // one logfmt line each on stderr (log_to_stderr).  Called on the
    // processor's threads; must not block; what it throws is dropped.
    // `[](const changefeed::LogRecord&) {}` silences the processor.
    LogSink log;
};

// Options of the latest-version feed.
struct LatestVersionOptions : ProcessorOptions {
    LatestVersionOptions() = default;
    LatestVersionOptions(ProcessorOptions common) : ProcessorOptions(std::move(common)) {}

    // Without a checkpoint, deliver the table's current rows before the log.
    // A checkpoint always wins over it.
    bool start_from_beginning = false;
    // Off by default: when a range's history is lost (retention dropped
    // changes after its checkpoint), re-read the range's current rows from the
    // table as a backfill, then continue from the log.  on_error is told
    // (history_lost) and the processor keeps running.  Without it the range
    // halts and the processor goes to history_lost.
    bool resync = false;
};

// Options of the all-versions-and-deletes feed: the common ones only.  There
// is no start_from_beginning (previous versions and deletes exist only inside
// the retention window) and no resync (lost versions cannot be re-read).
struct AllVersionsOptions : ProcessorOptions {
    AllVersionsOptions() = default;
    AllVersionsOptions(ProcessorOptions common) : ProcessorOptions(std::move(common)) {}
    // Latest-version options would lose their feed's fields here unnoticed.
    AllVersionsOptions(const LatestVersionOptions&) = delete;
};

// The options a processor is made with, whose type says the feed:
// LatestVersionOptions (or the common ProcessorOptions alone: the latest-version
// feed is the default) or AllVersionsOptions (BridgeOptions too).
class FeedOptions {
public:
    FeedOptions() = default;
    FeedOptions(ProcessorOptions common) : feed_(LatestVersionOptions(std::move(common))) {}
    FeedOptions(LatestVersionOptions options) : feed_(std::move(options)) {}
    FeedOptions(AllVersionsOptions options) : feed_(std::move(options)) {}

    const std::variant<LatestVersionOptions, AllVersionsOptions>& feed() const noexcept { return feed_; }
    const ProcessorOptions& common() const noexcept {
        return std::visit([](const ProcessorOptions& o) -> const ProcessorOptions& { return o; }, feed_);
    }

private:
    std::variant<LatestVersionOptions, AllVersionsOptions> feed_;
};

// The name a processor's leases are filed under on the server: `name`, or
// with a tenant "<tenant>/<name>" ('%' and '/' in the tenant percent-encoded,
// so two tenants never share a lease set).  What changefeed.lag(),
// reset_checkpoint() and drop_processor() take.
std::string stored_processor_name(const std::string& name, const std::string& tenant = {});

// "<host>-<pid>-<6 random hex digits>": the instance name used when none is
// given; a new one at each call, so every processor of a process has its own.
std::string default_instance_name();

namespace detail {
struct ProcessorImpl;
struct ProcessorAccess;
}  // namespace detail

// A processor, made by make_processor (PostgreSQL or in-memory).
class Processor {
public:
    // Stops.  Destroying a processor from inside its own handler is allowed:
    // it asks the processor to stop and returns at once; once the handler has
    // returned, the processor's own thread finishes the stop (stores the last
    // checkpoints, releases the leases, tells on_state_change `stopped`) and
    // frees it.  Whatever the handler and the callbacks use must outlive that.
    ~Processor();
    Processor(Processor&&) noexcept;
    // Stops the processor assigned over, as the destructor does.
    Processor& operator=(Processor&&) noexcept;
    Processor(const Processor&) = delete;
    Processor& operator=(const Processor&) = delete;

    // Checks the collection, creates the leases on the processor's first start
    // and begins reading in the background.  Throws Error: already_started,
    // collection_not_found, collection_not_enabled, connection_failed,
    // permission_denied (the role may not SELECT the table, is not a member of
    // changefeed_processor, is bound to another tenant, or the processor name
    // belongs to another role on this collection), invalid_option (a tenant on
    // a collection without a tenant column), instance_name_in_use (another
    // live instance runs under this instance name), history_lost /
    // malformed_position / foreign_position (start_time, start_position),
    // read_only_server (the collection's connection reached a standby:
    // connect the processor to the primary), ...
    void start();
    // Stops reading (waits for a running handler, whose stop token is
    // signalled) and releases the leases.  Idempotent.  Called from inside the
    // handler it only asks to stop; the leases are released by the next
    // stop() from outside or by the destructor.
    // A processor whose table is dropped or disabled stops on its own
    // (on_error is told with collection_not_found / collection_not_enabled).
    void stop();

    State state() const;
    const std::string& name() const;
    const std::string& instance_name() const;
    // The ranges this instance holds leases on right now.
    std::vector<int> owned_ranges() const;
    // A projector processor's counters (zero for other shapes).
    ProjectionStats projection_stats() const;

private:
    friend struct detail::ProcessorAccess;  // make_processor of each provider
    explicit Processor(std::unique_ptr<detail::ProcessorImpl> impl);
    void dispose() noexcept;
    std::unique_ptr<detail::ProcessorImpl> impl_;
};

// Makes a processor of `collection`'s feed (the options' type says which)
// that runs `handler`.  Throws Error(processor_name_empty) for an empty name,
// Error(processor_name_too_long) for one over 200 characters (with its tenant
// prefix), Error(instance_name_invalid), Error(invalid_option) for an empty
// handler, a bad interval or an option the handler's shape does not take.
// Does not connect.  The in-memory provider has the same (in_memory.hpp).
Processor make_processor(Collection collection, std::string name, ProcessorHandler handler, FeedOptions options = {});

}  // namespace changefeed
