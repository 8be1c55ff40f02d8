// Internal: the loop of every thread that must outlast failures -- the lease
// thread, the worker, the listeners, the subscriptions' reader and the
// bridge's publishing: try, and on a failure classify it (an errc, through
// to_error), let the thread report it and say what comes next, then wait a
// backoff before trying again.  What a thread reports, when it stops and how
// it waits stay with the thread: it passes them in.
#pragma once

#include <changefeed/error.hpp>

#include "core/db.hpp"
#include "supervise/consumer_policy.hpp"

#include <chrono>
#include <exception>
#include <functional>

namespace changefeed::detail {

// What follows a failed attempt.
enum class AfterFailure {
    back_off,  // wait the next backoff delay, then try again
    retry,     // try again at once (the thread waited as it needed)
    stop,      // leave the loop
};

class SupervisedLoop {
public:
    // `wait(delay)` waits up to `delay`, returning early (true) when the
    // thread is to stop.
    using Wait = std::function<bool(std::chrono::milliseconds)>;
    SupervisedLoop(std::chrono::milliseconds backoff_min, std::chrono::milliseconds backoff_max, Wait wait)
        : backoff_(backoff_min, backoff_max), wait_(std::move(wait)) {}

    // An attempt got through (connected, a round done): the next failure
    // waits the shortest delay again.
    void succeeded() { backoff_.reset(); }
    // Waits the next backoff delay; true when stopping.
    bool back_off() { return wait_(backoff_.next()); }

    // Runs `attempt` until `stopping()` holds when an attempt would start.
    // An attempt returns true to go on, false to leave the loop; one that
    // throws is classified and handed to `on_failure(Error, exception_ptr)`,
    // which decides what follows (still within the catch block, so it may
    // rethrow or look at std::current_exception()).
    template <class Stopping, class Attempt, class OnFailure>
    void run(Stopping&& stopping, Attempt&& attempt, OnFailure&& on_failure) {
        while (!stopping()) {
            AfterFailure next = AfterFailure::retry;
            try {
                if (!attempt()) return;
                continue;
            } catch (...) {
                next = on_failure(to_error(std::current_exception()), std::current_exception());
            }
            if (next == AfterFailure::stop) return;
            if (next == AfterFailure::back_off) back_off();
        }
    }

private:
    Backoff backoff_;
    Wait wait_;
};

}  // namespace changefeed::detail
