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
  // 5 in a row, 3 outages in a row, or 50% of >= 20 in 30 s; open 5 s doubling to 60 s.
  static BreakerConfig defaults() { return BreakerConfig{}; }

  CircuitBreaker& make(BreakerConfig config = defaults()) {
    breaker_ = std::make_unique<CircuitBreaker>(config, "cloud-small", "a", registry_);
    return *breaker_;
  }

  // One call allowed and finished at `now`.
  void call(CircuitBreaker& breaker, CallReport report, const WindowTotals* peers = nullptr) {
    Admission admission = breaker.allow(now_);
    ASSERT_TRUE(admission) << "the breaker refused a call it should allow";
    breaker.record(admission, report, now_, peers);
  }
  static CallReport outage() {
    CallReport report(CallOutcome::failure);
    report.outage = true;
    return report;
  }
  void calls(CircuitBreaker& breaker, int successes, int failures) {
    for (int i = 0; i < successes; ++i) call(breaker, CallOutcome::success);
    for (int i = 0; i < failures; ++i) call(breaker, CallOutcome::failure);
  }

  // `pattern`: 'F' a failure, 'S' a success, repeated `times`; stops once the breaker opens.
  void pattern(CircuitBreaker& breaker, const std::string& outcomes, int times = 1,
               const WindowTotals* peers = nullptr) {
    for (int t = 0; t < times; ++t) {
      for (char c : outcomes) {
        if (breaker.state(now_) != BreakerState::closed) return;
        call(breaker, c == 'F' ? CallOutcome::failure : CallOutcome::success, peers);
      }
    }
  }
  // Opens the breaker with five failures in a row.
  void open_it(CircuitBreaker& breaker) {
    calls(breaker, 0, 5);
    ASSERT_EQ(breaker.state(now_), BreakerState::open);
  }
  // Waits out the cool-down and fails the probe.
  void fail_probe(CircuitBreaker& breaker) {
    now_ += breaker.open_remaining(now_);
    Admission probe = breaker.allow(now_);
    ASSERT_TRUE(probe.probe);
    breaker.record(probe, CallOutcome::failure, now_);
    ASSERT_EQ(breaker.state(now_), BreakerState::open);
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

TEST_F(CircuitBreakerTest, FiveFailuresInARowOpen) {
  auto& breaker = make();
  calls(breaker, 0, 4);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  calls(breaker, 1, 4);  // a success resets the run
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  call(breaker, CallOutcome::failure);  // the fifth in a row
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
  EXPECT_FALSE(breaker.allow(now_));
  EXPECT_EQ(state_gauge(), 1.0);
  EXPECT_EQ(transitions("open"), 1.0);
}

TEST_F(CircuitBreakerTest, ConnectFailuresAndTimeoutsOpenAfterThreeInARow) {
  auto& breaker = make();
  call(breaker, outage());
  call(breaker, outage());
  call(breaker, CallOutcome::failure);  // a 500 proves the member is reachable: the run restarts
  call(breaker, outage());
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  call(breaker, CallOutcome::success);
  call(breaker, outage());
  call(breaker, outage());
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  call(breaker, outage());
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, ThirtyPercentFailuresNeverOpenIt) {
  auto& breaker = make();
  // 30% failures, at most three in a row, for 2,000 calls over 20 minutes.
  for (int i = 0; i < 200; ++i) {
    pattern(breaker, "FFFSSSSSSS");
    now_ += 6s;
  }
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  EXPECT_EQ(transitions("open"), 0.0);
}

TEST_F(CircuitBreakerTest, HalfTheCallsFailingOpensItAtMinCalls) {
  auto& breaker = make();
  pattern(breaker, "FS", 9);
  call(breaker, CallOutcome::failure);  // 10 of 19: below min_calls (20)
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  call(breaker, CallOutcome::success);  // 10 of 20: a success never opens it
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  call(breaker, CallOutcome::failure);  // 11 of 21 = 52%
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, AFailureShareThePoolSharesDoesNotOpenIt) {
  auto& breaker = make();
  const WindowTotals peers_as_bad{100, 55};  // the other members fail 55% of their calls too
  pattern(breaker, "FFSFFSFFSS", 4, &peers_as_bad);  // 60%, at most two in a row
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  const WindowTotals healthy_peers{100, 10};  // 10%: this member is the outlier
  call(breaker, CallOutcome::failure, &healthy_peers);
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, PeersWithTooFewCallsAreNoEvidence) {
  auto& breaker = make();
  const WindowTotals thin_peers{5, 5};  // below min_calls: the absolute rule alone decides
  pattern(breaker, "FFSFFSFFSS", 2, &thin_peers);
  call(breaker, CallOutcome::failure, &thin_peers);  // 13 of 21
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, IgnoredOutcomesCountNeitherWay) {
  auto& breaker = make();
  for (int i = 0; i < 50; ++i) call(breaker, CallOutcome::ignored);
  calls(breaker, 0, 4);
  call(breaker, CallOutcome::ignored);  // does not break the run either
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  calls(breaker, 0, 1);
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, OldFailuresSlideOutOfTheWindow) {
  auto& breaker = make();
  pattern(breaker, "FFFFS", 4);  // 16 of 20 would open it at the next failure ...
  now_ += 30s + 1ms;             // ... but they are now older than window_ms
  pattern(breaker, "FFFFS", 3);  // 12 of 15: below min_calls again
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
}

TEST_F(CircuitBreakerTest, FailuresWithinTheWindowStillCount) {
  auto& breaker = make();
  pattern(breaker, "FFFFS", 3);
  // Well inside the window (an outcome stays at least window_ms - window_ms/kBuckets).
  now_ += 25s;
  pattern(breaker, "FFFFS", 1);
  call(breaker, CallOutcome::failure);  // 17 of 21
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
}

TEST_F(CircuitBreakerTest, OpenForTheCoolDownThenExactlyOneProbe) {
  auto& breaker = make();
  open_it(breaker);
  EXPECT_EQ(breaker.open_remaining(now_), 5000ms);
  now_ += 4999ms;
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
  pattern(breaker, "FFFFS", 4);  // 16 of 20 in the window ...
  calls(breaker, 0, 1);          // ... and 17 of 21 opens it
  ASSERT_EQ(breaker.state(now_), BreakerState::open);
  now_ += 5s;
  Admission probe = breaker.allow(now_);
  ASSERT_TRUE(probe);
  breaker.record(probe, CallOutcome::success, now_);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  EXPECT_EQ(state_gauge(), 0.0);
  EXPECT_EQ(transitions("closed"), 1.0);
  // The failures from before are gone: 4 in a row and 16 of 20 again do not open it.
  pattern(breaker, "FFFFS", 4);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
}

TEST_F(CircuitBreakerTest, TheCoolDownDoublesWithEachOpeningInARowUpToTheCap) {
  auto& breaker = make();
  open_it(breaker);
  std::vector<std::int64_t> cool_downs = {breaker.open_duration().count()};
  for (int i = 0; i < 6; ++i) {
    fail_probe(breaker);
    cool_downs.push_back(breaker.open_duration().count());
  }
  EXPECT_EQ(cool_downs, (std::vector<std::int64_t>{5000, 10000, 20000, 40000, 60000, 60000, 60000}));
  EXPECT_EQ(breaker.open_remaining(now_), 60000ms);  // counted from the probe's failure
}

TEST_F(CircuitBreakerTest, AReopeningSoonAfterClosingCoolsDownLonger) {
  auto& breaker = make();
  open_it(breaker);
  now_ += 5s;
  Admission probe = breaker.allow(now_);
  breaker.record(probe, CallOutcome::success, now_);
  ASSERT_EQ(breaker.state(now_), BreakerState::closed);
  now_ += 10s;  // closed for less than a window
  open_it(breaker);
  EXPECT_EQ(breaker.open_duration(), 10000ms);
}

TEST_F(CircuitBreakerTest, TheOpeningsResetAfterAWholeWindowClosed) {
  auto& breaker = make();
  open_it(breaker);
  fail_probe(breaker);
  ASSERT_EQ(breaker.open_duration(), 10000ms);
  now_ += 10s;
  Admission probe = breaker.allow(now_);
  breaker.record(probe, CallOutcome::success, now_);
  now_ += 30s;  // a whole window without an opening: a blip again
  open_it(breaker);
  EXPECT_EQ(breaker.open_duration(), 5000ms);
}

TEST_F(CircuitBreakerTest, PanicAdmitsAnOpenMemberAndItsSuccessClosesIt) {
  auto& breaker = make();
  open_it(breaker);
  EXPECT_FALSE(breaker.allow(now_));
  Admission panic = breaker.allow_in_panic(now_);
  EXPECT_TRUE(panic);
  EXPECT_TRUE(panic.panic);
  EXPECT_FALSE(panic.probe);
  // A failure while open changes nothing: no longer cool-down, no new opening.
  breaker.record(panic, CallOutcome::failure, now_);
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
  EXPECT_EQ(breaker.open_duration(), 5000ms);
  EXPECT_EQ(transitions("open"), 1.0);
  Admission next = breaker.allow_in_panic(now_);
  ASSERT_TRUE(next.panic);
  breaker.record(next, CallOutcome::success, now_);
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  // A closed member in panic is an ordinary call.
  Admission ordinary = breaker.allow_in_panic(now_);
  EXPECT_TRUE(ordinary);
  EXPECT_FALSE(ordinary.panic);
}

TEST_F(CircuitBreakerTest, PanicInHalfOpenTakesTheProbeSlotFirst) {
  auto& breaker = make();
  open_it(breaker);
  now_ += 5s;
  Admission first = breaker.allow_in_panic(now_);
  EXPECT_TRUE(first.probe);
  Admission second = breaker.allow_in_panic(now_);
  EXPECT_TRUE(second.panic);
}

TEST_F(CircuitBreakerTest, IgnoredProbeLetsTheNextCallerProbe) {
  auto& breaker = make();
  open_it(breaker);
  now_ += 5s;
  Admission probe = breaker.allow(now_);
  ASSERT_TRUE(probe);
  breaker.record(probe, CallOutcome::ignored, now_);  // e.g. the client went away
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
  open_it(breaker);
  now_ += 5s;
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
  config.consecutive_failures = 0;  // off
  config.failure_ratio = 0.5;
  config.min_calls = 4;
  config.window_ms = 1000;
  config.open_ms = 200;
  config.max_open_ms = 300;
  auto& breaker = make(config);
  calls(breaker, 0, 3);  // 3 of 3: below min_calls, and no run rule
  EXPECT_EQ(breaker.state(now_), BreakerState::closed);
  calls(breaker, 0, 1);  // 4 of 4
  EXPECT_EQ(breaker.state(now_), BreakerState::open);
  now_ += 200ms;
  EXPECT_EQ(breaker.state(now_), BreakerState::half_open);
  fail_probe(breaker);
  EXPECT_EQ(breaker.open_duration(), 300ms);  // 400 capped
}

TEST_F(CircuitBreakerTest, AStreamThatBrokeMidwayMakesTheMemberFlakyForAWindow) {
  auto& breaker = make();
  EXPECT_TRUE(breaker.stream_flaky(now_)) << "a member with no finished stream is not trusted yet";
  CallReport ok(CallOutcome::success);
  ok.stream = true;
  call(breaker, ok);
  EXPECT_FALSE(breaker.stream_flaky(now_));
  call(breaker, CallOutcome::failure);  // a failed non-stream call says nothing about streams
  EXPECT_FALSE(breaker.stream_flaky(now_));
  CallReport broke(CallOutcome::failure);
  broke.stream = true;
  broke.broke_midway = true;
  call(breaker, broke);
  EXPECT_TRUE(breaker.stream_flaky(now_));
  now_ += 25s;
  EXPECT_TRUE(breaker.stream_flaky(now_));
  now_ += 6s;
  EXPECT_FALSE(breaker.stream_flaky(now_));
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
