// Internal: how one thread tells another, waiting on a condition variable,
// that something happened (a wake-up, a stop, a release).
#pragma once

#include <condition_variable>
#include <mutex>

namespace changefeed::detail {

// Sets `flag` under `mu`, then wakes every waiter of `cv`.
inline void raise_flag(std::mutex& mu, std::condition_variable& cv, bool& flag) {
    {
        std::lock_guard lock(mu);
        flag = true;
    }
    cv.notify_all();
}

}  // namespace changefeed::detail
