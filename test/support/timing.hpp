// Time bounds of the tests, scaled by one factor from the environment:
// CHANGEFEED_TEST_TIME_SCALE (default 1; e.g. 3 on a loaded machine).  A
// bound is how long a test waits for an event before it fails, never a
// duration the test asserts.
#pragma once

#include <chrono>
#include <cstdlib>

namespace cftest {

inline double time_scale() {
    static const double scale = [] {
        const char* s = std::getenv("CHANGEFEED_TEST_TIME_SCALE");
        const double v = s ? std::atof(s) : 1.0;
        return v > 0 ? v : 1.0;
    }();
    return scale;
}

// `bound` times the factor.
template <class Rep, class Period>
std::chrono::milliseconds scaled(std::chrono::duration<Rep, Period> bound) {
    return std::chrono::milliseconds(static_cast<long long>(std::chrono::duration<double, std::milli>(bound).count() *
                                                            time_scale()));
}

}  // namespace cftest
