// CircuitBreaker: the health of one upstream member, from the outcomes of its recent calls.
//
//   closed     every call is allowed; outcomes fill a sliding window of window_ms. When at least
//              min_calls are in the window and failures / calls >= failure_ratio it opens.
//   open       no call is allowed for open_ms; then it is half-open.
//   half_open  exactly one call (the probe) is allowed; concurrent callers are refused until the
//              probe's outcome is recorded. Probe success → closed (window cleared); probe
//              failure → open for another open_ms; a probe that says nothing about the member
//              (cancelled, client error, ...) frees the probe slot for the next caller.
//
// Time is passed in (`now`, steady clock) to every method, so tests drive it with a fake clock;
// open → half-open happens lazily, at the first method call after open_ms.
// Outcomes carry the Admission that allowed their call: an outcome from before the last
// transition (a call that started while closed and ended after the breaker opened) is dropped,
// so only calls made under the current state decide the next one.
//
// The window is a ring of kBuckets counters (bounded memory at any call rate): an outcome stays
// in it between window_ms - window_ms/kBuckets and window_ms after it was recorded.
//
// Metrics (declared here, in one place):
//   hengshi_breaker_state{pool,upstream}                 gauge: 0 closed, 1 open, 2 half-open
//   hengshi_breaker_transitions_total{pool,upstream,to}  counter; to = closed | open | half_open
// Each transition is logged (warn when opening).
//
// Thread-safety: every method may be called concurrently (one mutex).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/chain_config.h"
#include "core/deadline.h"
#include "obs/metrics.h"

namespace hengshi::cloud {

enum class BreakerState { closed = 0, open = 1, half_open = 2 };
const char* to_string(BreakerState state);

// What a finished call says about the member (see counts_against_member()).
enum class CallOutcome { success, failure, ignored };

// The answer of allow(): whether the call may go ahead, and what to hand back to record().
struct Admission {
  bool allowed = false;
  bool probe = false;            // this call is the half-open probe
  std::uint64_t generation = 0;  // the breaker's state generation when the call was allowed
  explicit operator bool() const { return allowed; }
};

class CircuitBreaker {
 public:
  static constexpr int kBuckets = 20;

  // `pool` and `upstream` label the metrics and log lines.
  CircuitBreaker(BreakerConfig config, std::string pool, std::string upstream,
                 obs::Registry& registry = obs::Registry::global());
  CircuitBreaker(const CircuitBreaker&) = delete;
  CircuitBreaker& operator=(const CircuitBreaker&) = delete;

  // May a call go to the member now? In half-open, true for exactly one caller (the probe)
  // until that call's outcome is recorded. Every allowed call must be followed by exactly one
  // record() with the returned Admission (CallOutcome::ignored when it says nothing).
  Admission allow(Clock::time_point now);
  // Would allow() say yes now? Does not take the probe slot (for choosing among members).
  bool would_allow(Clock::time_point now);

  void record(const Admission& admission, CallOutcome outcome, Clock::time_point now);

  BreakerState state(Clock::time_point now);
  // Time until an open breaker turns half-open; 0 when it is not open.
  Millis open_remaining(Clock::time_point now);
  const BreakerConfig& config() const { return config_; }

 private:
  struct Bucket {
    std::int64_t index = -1;  // which window_ms/kBuckets slice of time this bucket holds
    int calls = 0;
    int failures = 0;
  };

  void advance(Clock::time_point now);  // open → half-open once open_ms passed
  void transition(BreakerState to, Clock::time_point now, const char* why);
  void clear_window();
  std::int64_t bucket_index(Clock::time_point now) const;
  void add_to_window(bool failed, Clock::time_point now);
  void window_totals(Clock::time_point now, int& calls, int& failures) const;

  const BreakerConfig config_;
  const std::string pool_;
  const std::string upstream_;
  const std::int64_t bucket_ms_;
  obs::Gauge* state_gauge_;
  obs::Counter* to_closed_;
  obs::Counter* to_open_;
  obs::Counter* to_half_open_;

  std::mutex mutex_;
  BreakerState state_ = BreakerState::closed;
  std::uint64_t generation_ = 0;  // bumped on every transition
  Clock::time_point opened_at_{};
  bool probe_in_flight_ = false;
  std::array<Bucket, kBuckets> window_{};
};

}  // namespace hengshi::cloud
