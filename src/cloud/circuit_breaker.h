// CircuitBreaker: the health of one upstream member, from the outcomes of its recent calls.
//
//   closed     every call is allowed; outcomes fill a sliding window of window_ms. It opens on
//              - consecutive_failures counted failures in a row, or
//              - consecutive_outage_failures connect failures / timeouts in a row (the outage
//                signature: nothing answers, so waiting for more evidence only costs time), or
//              - a failure share over the window that is >= failure_ratio among >= min_calls
//                calls AND, when the pool's other members have >= min_calls calls of their
//                own, >= their share + outlier_margin (a failure the whole pool shares is not
//                this member's: taking it out would only move the load onto equally bad peers).
//   open       no call is allowed for the cool-down; then it is half-open. The k-th opening in
//              a row cools down for open_ms × 2^(k−1), capped at max_open_ms; k resets once the
//              breaker has stayed closed for a whole window. A blip recovers in seconds, a dead
//              member is probed rarely.
//   half_open  exactly one call (the probe) is allowed; concurrent callers are refused until the
//              probe's outcome is recorded. Probe success → closed (window cleared); probe
//              failure → open again (the next opening in a row); a probe that says nothing about
//              the member (cancelled, client error, ...) frees the probe slot for the next caller.
//
// Panic (the pool's rule, cloud_pool.h): a pool whose members mostly refuse calls picks among all
// of them anyway. allow_in_panic() admits a call to an open member; such a call is a single
// attempt (the chain does not retry it), and its success closes the breaker — it is the proof
// that the member is back.
//
// Streams: a stream that breaks after its first piece (a drop, garbage, a stall) is remembered
// apart from the window, for the chain's commit point (stream_flaky()).
//
// Time is passed in (`now`, steady clock) to every method, so tests drive it with a fake clock;
// open → half-open happens lazily, at the first method call after the cool-down.
// Outcomes carry the Admission that allowed their call: an outcome from before the last
// transition (a call that started while closed and ended after the breaker opened) is dropped,
// so only calls made under the current state decide the next one.
//
// The windows are rings of kBuckets counters (bounded memory at any call rate): an outcome stays
// in them between window_ms - window_ms/kBuckets and window_ms after it was recorded.
//
// Metrics (declared here, in one place):
//   hengshi_breaker_state{pool,upstream}                 gauge: 0 closed, 1 open, 2 half-open
//   hengshi_breaker_transitions_total{pool,upstream,to}  counter; to = closed | open | half_open
// Each transition is logged (warn when opening, with the reason and the cool-down).
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

// A finished call as the breaker sees it. Implicit from a bare outcome (tests, simple callers).
struct CallReport {
  CallReport(CallOutcome outcome = CallOutcome::ignored) : outcome(outcome) {}  // NOLINT
  CallOutcome outcome;
  bool outage = false;         // a connect failure or a timeout
  bool stream = false;         // the call was a stream
  bool broke_midway = false;   // a stream that failed after its first piece
};

// The answer of allow(): whether the call may go ahead, and what to hand back to record().
struct Admission {
  bool allowed = false;
  bool probe = false;            // this call is the half-open probe
  bool panic = false;            // allowed only by the pool's panic rule: the member is open
  std::uint64_t generation = 0;  // the breaker's state generation when the call was allowed
  explicit operator bool() const { return allowed; }
};

// Calls and failures in a breaker's window (for comparing a member with its pool's others).
struct WindowTotals {
  int calls = 0;
  int failures = 0;
  WindowTotals& operator+=(const WindowTotals& other) {
    calls += other.calls;
    failures += other.failures;
    return *this;
  }
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
  // The pool is in panic: always allowed. Where allow() would refuse, the admission says
  // `panic` (a single attempt; its success closes the breaker).
  Admission allow_in_panic(Clock::time_point now);
  // Would allow() say yes now? Does not take the probe slot (for choosing among members).
  bool would_allow(Clock::time_point now);

  // `peers`: the pool's other members' window totals (null when it has none); only read for a
  // counted failure, so callers may skip computing it for other outcomes.
  void record(const Admission& admission, const CallReport& report, Clock::time_point now,
              const WindowTotals* peers = nullptr);

  BreakerState state(Clock::time_point now);
  // Time until an open breaker turns half-open; 0 when it is not open.
  Millis open_remaining(Clock::time_point now);
  // The cool-down the current (or last) opening was given.
  Millis open_duration();
  WindowTotals window(Clock::time_point now);
  // Whether a stream of this member broke after its first piece within the last window, or it
  // has never finished a stream (nothing is known yet): the chain holds such a stream's pieces
  // back to the commit point.
  bool stream_flaky(Clock::time_point now);
  const BreakerConfig& config() const { return config_; }

 private:
  struct Bucket {
    std::int64_t index = -1;  // which window_ms/kBuckets slice of time this bucket holds
    int calls = 0;
    int failures = 0;
  };
  using Ring = std::array<Bucket, kBuckets>;

  void advance(Clock::time_point now);  // open → half-open once the cool-down passed
  void open(Clock::time_point now, const std::string& why);
  void transition(BreakerState to, Clock::time_point now, const std::string& why);
  std::int64_t bucket_index(Clock::time_point now) const;
  void add(Ring& ring, bool failed, Clock::time_point now);
  WindowTotals totals(const Ring& ring, Clock::time_point now) const;
  // Which rule, if any, opens the breaker after a counted failure ("" = none).
  std::string opening_reason(const CallReport& report, Clock::time_point now,
                             const WindowTotals* peers) const;

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
  Clock::time_point closed_at_{};  // when it last closed (for resetting openings_in_a_row_)
  Millis open_for_{0};             // the current opening's cool-down
  int openings_in_a_row_ = 0;
  bool probe_in_flight_ = false;
  int consecutive_failures_ = 0;
  int consecutive_outage_failures_ = 0;
  Ring window_{};
  Ring streams_{};  // stream calls, and those that broke midway (kept across transitions)
  bool finished_a_stream_ = false;
};

}  // namespace hengshi::cloud
