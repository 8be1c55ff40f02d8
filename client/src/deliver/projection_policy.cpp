#include "deliver/projection_policy.hpp"

#include <string>

namespace changefeed::detail {

void check_handler(const ProcessorHandler& handler, const ProcessorOptions& options) {
    if (std::visit([](const auto& h) { return !h; }, handler))
        throw Error(errc::invalid_option, "the handler must not be empty");
    const HandlerShape shape = shape_of(handler);
    if (!(options.duplicate_alert_share > 0.0 && options.duplicate_alert_share <= 1.0))
        throw Error(errc::invalid_option, "duplicate_alert_share must be in (0, 1]");
    if (options.duplicate_alert_window < 1)
        throw Error(errc::invalid_option, "duplicate_alert_window must be at least 1");
    if (options.checkpoint_mode == CheckpointMode::manual && shape != HandlerShape::handler)
        throw Error(errc::invalid_option,
                    shape == HandlerShape::projector
                        ? "CheckpointMode::manual needs a Handler: a projector's checkpoints follow its "
                          "deduplication store"
                        : "CheckpointMode::manual needs a Handler: a transactional handler's checkpoint commits "
                          "with its transaction");
}

void ProjectionCounters::reset() {
    applied_ = 0;
    skipped_ = 0;
    std::lock_guard lock(mu_);
    last_.clear();
    duplicates_in_window_ = 0;
    alerted_ = false;
}

std::optional<Error> ProjectionCounters::count(bool duplicate) {
    (duplicate ? skipped_ : applied_).fetch_add(1, std::memory_order_relaxed);
    std::lock_guard lock(mu_);
    last_.push_back(duplicate);
    duplicates_in_window_ += duplicate;
    if (static_cast<int>(last_.size()) > window_) {
        duplicates_in_window_ -= last_.front();
        last_.pop_front();
    }
    // The share of the window, not of what was seen so far: the first
    // duplicate of a fresh processor is not a trend.
    const bool above = duplicates_in_window_ > share_ * window_;
    if (!above) {
        alerted_ = false;
        return std::nullopt;
    }
    if (alerted_) return std::nullopt;
    alerted_ = true;
    return Error(errc::duplicates_rising,
                 std::to_string(duplicates_in_window_) + " of the last " + std::to_string(window_) +
                     " changes were duplicates (alert above " + std::to_string(share_) +
                     "): changes are redelivered more than expected -- a handler failing after applying, "
                     "instances losing leases, or checkpoints not stored");
}

ProjectionStats ProjectionCounters::stats() const {
    return ProjectionStats{applied_.load(std::memory_order_relaxed), skipped_.load(std::memory_order_relaxed)};
}

}  // namespace changefeed::detail
