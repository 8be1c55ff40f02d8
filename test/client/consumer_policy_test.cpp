// The policy the processors and subscriptions share, without a server:
// reconnect delays (doubling, capped, jittered), handler failures as errors,
// state changes told once, callbacks that throw swallowed.
#include "supervise/consumer_policy.hpp"

#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using changefeed::detail::Backoff;

TEST(Backoff, DoublesUpToTheMaximumWithJitterInTheUpperHalf) {
    Backoff b(100ms, 1000ms);
    const std::vector<std::chrono::milliseconds> uppers{100ms, 200ms, 400ms, 800ms, 1000ms, 1000ms};
    for (auto upper : uppers) {
        auto d = b.next();
        EXPECT_LE(d, upper);
        EXPECT_GE(d, upper / 2);
    }
    b.reset();
    auto d = b.next();
    EXPECT_LE(d, 100ms);
    EXPECT_GE(d, 50ms);
}

TEST(Backoff, DelaysVary) {
    std::set<long> seen;
    for (int i = 0; i < 50; ++i) {
        Backoff b(1000ms, 1000ms);
        seen.insert(static_cast<long>(b.next().count()));
    }
    EXPECT_GT(seen.size(), 5u);  // 50 draws from 501 values
}

TEST(HandlerFailure, CarriesTheExceptionsMessage) {
    auto e = changefeed::detail::handler_failure(std::make_exception_ptr(std::runtime_error("boom")), "handler failed");
    EXPECT_EQ(e.code(), changefeed::errc::handler_failed);
    EXPECT_EQ(std::string(e.what()).rfind("handler failed: boom", 0), 0u) << e.what();
    // Not a std::exception: no message to add.
    auto other = changefeed::detail::handler_failure(std::make_exception_ptr(42), "handler failed");
    EXPECT_EQ(std::string(other.what()).rfind("handler failed", 0), 0u) << other.what();
    EXPECT_EQ(std::string(other.what()).rfind("handler failed: boom", 0), std::string::npos);
}

TEST(ConsumerEvents, EachStateChangeIsToldOnceAndThrowingCallbacksAreSwallowed) {
    std::vector<changefeed::State> told;
    int errors = 0;
    changefeed::detail::ConsumerEvents events(
        [&](const changefeed::ErrorInfo& e) {
            ++errors;
            EXPECT_EQ(e.range_id, 3);
            throw std::runtime_error("on_error throws");
        },
        [&](changefeed::State s) {
            told.push_back(s);
            throw std::runtime_error("on_state_change throws");
        });
    events.set_state(changefeed::State::starting);
    events.set_state(changefeed::State::running);
    events.set_state(changefeed::State::running);
    EXPECT_EQ(events.state(), changefeed::State::running);
    EXPECT_EQ(told, (std::vector<changefeed::State>{changefeed::State::starting, changefeed::State::running}));
    events.report_handler_failure(3, std::make_exception_ptr(std::runtime_error("x")), "handler failed");
    EXPECT_EQ(errors, 1);
}
