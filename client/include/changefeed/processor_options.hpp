// The options a processor is made with, per feed.
#pragma once

#include <changefeed/error.hpp>
#include <changefeed/log.hpp>
#include <changefeed/metrics.hpp>
#include <changefeed/recovery.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace changefeed {

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

// What every processor takes, whichever its feed.  A processor is given
// LatestVersionOptions or AllVersionsOptions, which say the feed: the options
// of one feed do not exist on the other, so setting them is a compile error.
struct ProcessorOptions {
    // Unique among the live instances of one processor: starting a second
    // instance under a name that is live fails (instance_name_in_use).
    // Empty: "<host>-<n>", the lowest slot free at start() (see
    // default_instance_name()): unique per processor object, and the same
    // again for a process restarted on the host.
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
    // A caught-up processor's next read waits in the server for a commit and
    // returns it in the same round trip (read_ranges(..., wait), up to
    // poll_interval), where the server has it: preloaded, not a standby.
    // Notifications (LISTEN) stay as the fallback.  False: wait for a
    // notification or the poll interval between reads.
    bool long_poll = true;
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

    // Deliver the table's schema changes too (ALTER TABLE ... ADD, DROP,
    // RENAME COLUMN, type and key changes): a Change of Operation::schema in
    // every range, in order with the data, whose `current` says what changed
    // (change.hpp).  Off: documents simply show the new shape.  The in-memory
    // provider has no schema and delivers none.
    bool schema_changes = false;
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

}  // namespace changefeed
