// Which ranges of a processor found nothing waiting: a read that came back
// empty (Metrics::range_lag of zero), after which the range's worker sleeps
// until a wake-up or its poll interval.  Set as ProcessorOptions::metrics.
#pragma once

#include <changefeed/metrics.hpp>

#include <chrono>
#include <cstddef>
#include <mutex>
#include <set>

namespace cftest {

class CaughtUp : public changefeed::Metrics {
public:
    void range_lag(const changefeed::MetricScope&, int range, std::chrono::milliseconds lag) override {
        if (lag.count() != 0) return;
        std::lock_guard lock(mu_);
        ranges_.insert(range);
    }
    // How many ranges were caught up at least once.
    std::size_t ranges() const {
        std::lock_guard lock(mu_);
        return ranges_.size();
    }

private:
    mutable std::mutex mu_;
    std::set<int> ranges_;
};

}  // namespace cftest
