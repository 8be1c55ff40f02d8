// Internal: what the two providers share about the handler shapes beside
// Handler (projection.hpp): which shape a processor has, the options each
// shape accepts, a projector's counters and its duplicates alert.
#pragma once

#include <changefeed/handler.hpp>
#include <changefeed/processor_options.hpp>
#include <changefeed/projection.hpp>

#include <atomic>
#include <deque>
#include <mutex>
#include <optional>

namespace changefeed::detail {

// In the order of ProcessorHandler's alternatives.
enum class HandlerShape { handler, projector, transactional };

inline HandlerShape shape_of(const ProcessorHandler& h) { return static_cast<HandlerShape>(h.index()); }

// Throws Error(invalid_option): an empty handler, duplicate_alert_share
// outside (0, 1], duplicate_alert_window < 1, CheckpointMode::manual with a
// shape other than Handler (a projector's and a transactional handler's
// checkpoints are the processor's: they must follow the dedup store or the
// commit).
void check_handler(const ProcessorHandler& handler, const ProcessorOptions& options);

// What on_error's handler_failed message names.
inline const char* culprit_of(const ProcessorHandler& h) {
    return shape_of(h) == HandlerShape::projector ? "projector failed" : "handler failed";
}

// A projector's counters and its duplicates alert, shared by the threads
// that deliver and projection_stats().
class ProjectionCounters {
public:
    ProjectionCounters(double share, int window) : share_(share), window_(window) {}

    // Counts one change's outcome.  Returns the duplicates_rising Error to
    // tell on_error when this outcome made the share of duplicates among the
    // last `window` outcomes cross above `share` (once per crossing; re-armed
    // when it falls back to `share` or below).
    std::optional<Error> count(bool duplicate);
    ProjectionStats stats() const;
    // Back to zero, for a new start.
    void reset();

private:
    const double share_;
    const int window_;
    std::atomic<std::int64_t> applied_{0};
    std::atomic<std::int64_t> skipped_{0};
    std::mutex mu_;  // guards the window
    std::deque<bool> last_;
    int duplicates_in_window_ = 0;
    bool alerted_ = false;
};

}  // namespace changefeed::detail
