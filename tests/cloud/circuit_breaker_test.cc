#include "cloud/circuit_breaker.h"

#include <gtest/gtest.h>

#include <vector>

#include "cloud/upstream_error.h"
#include "obs/metrics.h"

namespace hengshi::cloud {
namespace {

using namespace std::chrono_literals;

// A fake clock: tests move `now` by hand, nothing sleeps.
class CircuitBreakerTest : public ::testing::Test {
 protected:
  static BreakerConfig defaults() { return BreakerConfig{}; }  // 20% of >= 10 in 30 s, open 30 s

  CircuitBreaker& make(BreakerConfig config = defaults()) {
    breaker_ = std::make_unique<CircuitBreaker>(config, "cloud-small", "a", registry_);
    return *breaker_;
  }

  // One call allowed and finished at `now`.
  void call(CircuitBreaker& breaker, CallOutcome outcome) {
    Admission admission = breaker.allow(now_);
    ASSERT_TRUE(admission) << "the breaker refused a call it should allow";
    breaker.record(admission, outcome, now_);
  }
  void calls(CircuitBreaker& breaker, int successes, int failures) {
    for (int i = 0; i < successes; ++i) call(breaker, CallOutcome::success);
    for (int i = 0; i < failures; ++i) call(breaker, CallOutcome::failure);
  }

  double state_gauge() {
    return registry_
        .gauge("hengshi_breaker_state", "", {{"pool", "cloud-small"}, {"upstream", "a"}})
        .value();
  }
  double transitions(const char* to) {
    return registry_
        .counter("hengshi_breaker_transitions_total", "",
                 {{"pool", "cloud-small"}, {"upstream", "a"}, {"to", to}})
        .value();
  }

  obs::Registry registry_;
  std::unique_ptr<CircuitBreaker> breaker_;
  Clock::time_point now_ = Clock::time_point{} + 1000h;  // far from the epoch, like a real clock
};

TEST_F(CircuitBreakerTest, OpensAtExactlyTheFailureRatio) {
  auto& breaker = make();
  calls(breaker, 8, 1);  // 1 of 9: below min_calls and below 20%
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  call(breaker, CallOutcome::failure);  // 2 of 10 = 20%: the threshold itself
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
  EXPECT_FALSE(breaker.allow(now_));
  EXPECT_EQ(state_gauge(), 1.0);
  EXPECT_EQ(transitions("open"), 1.0);
}

TEST_F(CircuitBreakerTest, StaysClosedJustBelowTheRatio) {
  auto& breaker = make();
  calls(breaker, 9, 1);  // 1 of 10 = 10%
  calls(breaker, 9, 1);  // 2 of 20 = 10%
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  calls(breaker, 0, 3);  // 5 of 23 = 21.7%
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, NeverOpensBelowMinCalls) {
  auto& breaker = make();
  calls(breaker, 0, 9);  // 100% failures, but only 9 calls
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  EXPECT_TRUE(breaker.allow(now_));
  calls(breaker, 0, 1);
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, IgnoredOutcomesCountNeitherWay) {
  auto& breaker = make();
  for (int i = 0; i < 50; ++i) call(breaker, CallOutcome::ignored);
  calls(breaker, 0, 9);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);  // 9 calls, not 59
  calls(breaker, 0, 1);
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, OldFailuresSlideOutOfTheWindow) {
  auto& breaker = make();
  calls(breaker, 0, 9);
  now_ += 30s + 1ms;     // the 9 failures are now older than window_ms
  calls(breaker, 9, 1);  // 1 of 10 in the window: would be 10 of 19 with the old ones
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
}

TEST_F(CircuitBreakerTest, FailuresWithinTheWindowStillCount) {
  auto& breaker = make();
  calls(breaker, 0, 9);
  // Well inside the window (an outcome stays at least window_ms - window_ms/kBuckets).
  now_ += 25s;
  calls(breaker, 0, 1);
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, OpenForOpenMsThenExactlyOneProbe) {
  auto& breaker = make();
  calls(breaker, 0, 10);
  ASSERT_EQ(breaker.state(now_), BreakerState::open);
  EXPECT_EQ(breaker.open_remaining(now_), 30000ms);
  now_ += 29999ms;
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
  EXPECT_EQ(breaker.open_remaining(now_), 1ms);
  EXPECT_FALSE(breaker.allow(now_));
  EXPECT_FALSE(breaker.would_allow(now_));

  now_ += 1ms;
  EXPECT_EQ(breaker.state(now_), BreakerState::half_open);
  EXPECT_EQ(breaker.open_remaining(now_), 0ms);
  EXPECT_EQ(state_gauge(), 2.0);
  EXPECT_TRUE(breaker.would_allow(now_));  // peeking takes no probe slot
  Admission probe = breaker.allow(now_);
  EXPECT_TRUE(probe);
  EXPECT_TRUE(probe.probe);
  // Concurrent callers are refused while the probe is in flight, however many.
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(breaker.allow(now_));
  EXPECT_FALSE(breaker.would_allow(now_));
  EXPECT_EQ(transitions("half_open"), 1.0);
}

TEST_F(CircuitBreakerTest, ProbeSuccessClosesWithAClearedWindow) {
  auto& breaker = make();
  calls(breaker, 0, 10);
  now_ += 30s;
  Admission probe = breaker.allow(now_);
  ASSERT_TRUE(probe);
  breaker.record(probe, CallOutcome::success, now_);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  EXPECT_EQ(state_gauge(), 0.0);
  EXPECT_EQ(transitions("closed"), 1.0);
  // The 10 failures from before are gone: 9 more failures do not reach min_calls.
  calls(breaker, 0, 9);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
}

TEST_F(CircuitBreakerTest, ProbeFailureOpensForAnotherOpenMs) {
  auto& breaker = make();
  calls(breaker, 0, 10);
  now_ += 30s;
  Admission probe = breaker.allow(now_);
  ASSERT_TRUE(probe);
  now_ += 500ms;
  breaker.record(probe, CallOutcome::failure, now_);
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
  EXPECT_EQ(breaker.open_remaining(now_),
            30000ms);  // counted from the probe's failure
  EXPECT_EQ(transitions("open"), 2.0);
  now_ += 30s;
  EXPECT_EQ(breaker.state(now_), BreakerState::half_open);
}

TEST_F(CircuitBreakerTest, IgnoredProbeLetsTheNextCallerProbe) {
  auto& breaker = make();
  calls(breaker, 0, 10);
  now_ += 30s;
  Admission probe = breaker.allow(now_);
  ASSERT_TRUE(probe);
  breaker.record(probe, CallOutcome::ignored,
                 now_);  // e.g. the client went away
  EXPECT_EQ(breaker.state(now_), BreakerState::half_open);
  Admission next = breaker.allow(now_);
  EXPECT_TRUE(next);
  EXPECT_TRUE(next.probe);
  EXPECT_FALSE(breaker.allow(now_));
}

TEST_F(CircuitBreakerTest, OutcomesOfCallsFromAnEarlierStateAreDropped) {
  auto& breaker = make();
  // A slow call admitted while closed ...
  Admission slow = breaker.allow(now_);
  ASSERT_TRUE(slow);
  calls(breaker, 0, 10);
  now_ += 30s;
  Admission probe = breaker.allow(now_);
  ASSERT_TRUE(probe);
  // ... that fails while the probe is in flight does not decide the half-open state.
  breaker.record(slow, CallOutcome::failure, now_);
  EXPECT_EQ(breaker.state(now_), BreakerState::half_open);
  breaker.record(probe, CallOutcome::success, now_);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
}

TEST_F(CircuitBreakerTest, DisabledAlwaysAllows) {
  BreakerConfig config;
  config.enabled = false;
  auto& breaker = make(config);
  calls(breaker, 0, 100);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  EXPECT_TRUE(breaker.allow(now_));
  EXPECT_EQ(breaker.open_remaining(now_), 0ms);
}

TEST_F(CircuitBreakerTest, ConfiguredThresholdsAreUsed) {
  BreakerConfig config;
  config.failure_ratio = 0.5;
  config.min_calls = 4;
  config.window_ms = 1000;
  config.open_ms = 200;
  auto& breaker = make(config);
  calls(breaker, 2, 1);  // 1 of 3
  calls(breaker, 0, 1);  // 2 of 4 = 50%
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
  now_ += 200ms;
  EXPECT_EQ(breaker.state(now_), BreakerState::half_open);
}

TEST(UpstreamErrorClassification, CountedFailuresAndNotCountedKinds) {
  for (auto kind : {UpstreamErrorKind::connect_failed, UpstreamErrorKind::connect_timeout,
                    UpstreamErrorKind::ttft_timeout, UpstreamErrorKind::total_timeout,
                    UpstreamErrorKind::rate_limited, UpstreamErrorKind::server_error,
                    UpstreamErrorKind::closed_early, UpstreamErrorKind::bad_response}) {
    EXPECT_TRUE(counts_against_member(kind)) << to_string(kind);
  }
  for (auto kind : {UpstreamErrorKind::client_error, UpstreamErrorKind::auth_failed,
                    UpstreamErrorKind::cancelled, UpstreamErrorKind::overloaded,
                    UpstreamErrorKind::circuit_open}) {
    EXPECT_FALSE(counts_against_member(kind)) << to_string(kind);
  }
}

TEST(UpstreamErrorClassification, CircuitOpenIsA503NamingThePool) {
  UpstreamError error;
  error.kind = UpstreamErrorKind::circuit_open;
  error.message = "pool 'cloud-large' (2 members; the next probe is allowed in 1500 ms)";
  error.retry_after_ms = 1500;
  EXPECT_FALSE(error.retryable());
  EXPECT_STREQ(to_string(error.kind), "circuit_open");
  ApiError api = error.to_api_error();
  EXPECT_EQ(api.status, 503);
  EXPECT_EQ(api.code, "upstream_unavailable");
  EXPECT_NE(api.message.find("cloud-large"), std::string::npos) << api.message;
}

}  // namespace
}  // namespace hengshi::cloud
