// Which ranges of a processor found nothing waiting: a read that came back
// empty (Metrics::range_lag of zero, not following a delivered batch), after
// which the range's worker sleeps until a wake-up or its poll interval.  Set
// as ProcessorOptions::metrics.  Counting those reads proves a range went on
// reading: after two more of them, at least one whole idle step (the read and
// what follows it) ran.
#pragma once

#include <changefeed/metrics.hpp>

#include <chrono>
#include <cstddef>
#include <map>
#include <mutex>
#include <set>

namespace cftest {

class CaughtUp : public changefeed::Metrics {
public:
    // A batch's own lag follows it (and may be 0 ms): it is no empty read.  A
    // backfill page has none, so the next empty read may go uncounted: a
    // wait on these counts only ever waits longer.
    void batch_delivered(const changefeed::MetricScope&, int range, std::int64_t, std::chrono::nanoseconds) override {
        std::lock_guard lock(mu_);
        after_batch_.insert(range);
    }
    void range_lag(const changefeed::MetricScope&, int range, std::chrono::milliseconds lag) override {
        std::lock_guard lock(mu_);
        if (after_batch_.erase(range) || lag.count() != 0) return;
        ++by_range_[range];
        ++empty_reads_;
    }
    // How many ranges were caught up at least once.
    std::size_t ranges() const {
        std::lock_guard lock(mu_);
        return by_range_.size();
    }
    // How many reads, of any range, found nothing waiting.
    std::size_t empty_reads() const {
        std::lock_guard lock(mu_);
        return empty_reads_;
    }
    // The same per range.
    std::map<int, std::size_t> by_range() const {
        std::lock_guard lock(mu_);
        return by_range_;
    }
    // Whether each of the ranges 0 .. ranges-1 found nothing waiting again
    // since `before` (a by_range() taken earlier): whatever was pending in any
    // range then (a retry, a redelivery) was handled by now.
    bool all_again(const std::map<int, std::size_t>& before, int ranges) const {
        std::lock_guard lock(mu_);
        for (int r = 0; r < ranges; ++r) {
            const auto now = by_range_.find(r);
            const auto then = before.find(r);
            if (now == by_range_.end() || (then != before.end() && now->second <= then->second)) return false;
        }
        return true;
    }

private:
    mutable std::mutex mu_;
    std::map<int, std::size_t> by_range_;
    std::set<int> after_batch_;
    std::size_t empty_reads_ = 0;
};

}  // namespace cftest
