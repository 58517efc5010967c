#include "cloud/circuit_breaker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace hengshi::cloud {

const char* to_string(BreakerState state) {
  switch (state) {
    case BreakerState::closed:
      return "closed";
    case BreakerState::open:
      return "open";
    case BreakerState::half_open:
      return "half_open";
  }
  return "unknown";
}

CircuitBreaker::CircuitBreaker(BreakerConfig config, std::string pool, std::string upstream,
                               obs::Registry& registry)
    : config_(std::move(config)),
      pool_(std::move(pool)),
      upstream_(std::move(upstream)),
      bucket_ms_(std::max<std::int64_t>(1, config_.window_ms / kBuckets)) {
  const obs::Labels member{{"pool", pool_}, {"upstream", upstream_}};
  state_gauge_ =
      &registry.gauge("hengshi_breaker_state",
                      "Circuit breaker state per upstream: 0 closed, 1 open, 2 half-open.", member);
  const char* transitions_help = "Circuit breaker transitions per upstream, by new state.";
  auto to = [&](BreakerState state) {
    return obs::Labels{{"pool", pool_}, {"upstream", upstream_}, {"to", to_string(state)}};
  };
  to_closed_ = &registry.counter("hengshi_breaker_transitions_total", transitions_help,
                                 to(BreakerState::closed));
  to_open_ = &registry.counter("hengshi_breaker_transitions_total", transitions_help,
                               to(BreakerState::open));
  to_half_open_ = &registry.counter("hengshi_breaker_transitions_total", transitions_help,
                                    to(BreakerState::half_open));
  state_gauge_->set(0);
}

Admission CircuitBreaker::allow(Clock::time_point now) {
  if (!config_.enabled) return {true, false, 0};
  std::lock_guard lock(mutex_);
  advance(now);
  switch (state_) {
    case BreakerState::closed:
      return {true, false, generation_};
    case BreakerState::open:
      return {false, false, generation_};
    case BreakerState::half_open:
      if (probe_in_flight_) return {false, false, generation_};
      probe_in_flight_ = true;
      return {true, true, generation_};
  }
  return {};
}

bool CircuitBreaker::would_allow(Clock::time_point now) {
  if (!config_.enabled) return true;
  std::lock_guard lock(mutex_);
  advance(now);
  return state_ == BreakerState::closed || (state_ == BreakerState::half_open && !probe_in_flight_);
}

void CircuitBreaker::record(const Admission& admission, CallOutcome outcome,
                            Clock::time_point now) {
  if (!config_.enabled || !admission.allowed) return;
  std::lock_guard lock(mutex_);
  advance(now);
  if (admission.generation != generation_) return;  // decided under a state that has passed
  if (state_ == BreakerState::half_open) {
    if (!admission.probe) return;
    probe_in_flight_ = false;
    if (outcome == CallOutcome::success) {
      transition(BreakerState::closed, now, "the probe call succeeded");
    } else if (outcome == CallOutcome::failure) {
      transition(BreakerState::open, now, "the probe call failed");
    }
    return;  // ignored: the next caller probes instead
  }
  if (state_ != BreakerState::closed || outcome == CallOutcome::ignored) return;
  add_to_window(outcome == CallOutcome::failure, now);
  int calls = 0;
  int failures = 0;
  window_totals(now, calls, failures);
  // A small epsilon so that e.g. 2 of 10 meets 0.2 whatever the rounding of 0.2 × 10.
  if (calls >= std::max(1, config_.min_calls) &&
      static_cast<double>(failures) >= config_.failure_ratio * calls - 1e-9 && failures > 0) {
    std::string why =
        std::to_string(failures) + " of " + std::to_string(calls) + " calls failed in the window";
    transition(BreakerState::open, now, why.c_str());
  }
}

BreakerState CircuitBreaker::state(Clock::time_point now) {
  if (!config_.enabled) return BreakerState::closed;
  std::lock_guard lock(mutex_);
  advance(now);
  return state_;
}

Millis CircuitBreaker::open_remaining(Clock::time_point now) {
  if (!config_.enabled) return Millis(0);
  std::lock_guard lock(mutex_);
  advance(now);
  if (state_ != BreakerState::open) return Millis(0);
  auto left = opened_at_ + Millis(config_.open_ms) - now;
  // Rounded up: a Retry-After built from it must not invite a call that is still refused.
  return std::max(Millis(1), std::chrono::ceil<Millis>(left));
}

void CircuitBreaker::advance(Clock::time_point now) {
  if (state_ == BreakerState::open && now - opened_at_ >= Millis(config_.open_ms)) {
    transition(BreakerState::half_open, now, "open_ms passed; one probe call is allowed");
  }
}

void CircuitBreaker::transition(BreakerState to, Clock::time_point now, const char* why) {
  state_ = to;
  ++generation_;
  probe_in_flight_ = false;
  state_gauge_->set(static_cast<double>(static_cast<int>(to)));
  switch (to) {
    case BreakerState::open:
      opened_at_ = now;
      to_open_->inc();
      spdlog::warn("pool '{}' upstream '{}': circuit breaker opened for {} ms ({})", pool_,
                   upstream_, config_.open_ms, why);
      break;
    case BreakerState::half_open:
      to_half_open_->inc();
      spdlog::info("pool '{}' upstream '{}': circuit breaker half-open ({})", pool_, upstream_,
                   why);
      break;
    case BreakerState::closed:
      clear_window();
      to_closed_->inc();
      spdlog::info("pool '{}' upstream '{}': circuit breaker closed ({})", pool_, upstream_, why);
      break;
  }
}

void CircuitBreaker::clear_window() { window_.fill(Bucket{}); }

std::int64_t CircuitBreaker::bucket_index(Clock::time_point now) const {
  return std::chrono::duration_cast<Millis>(now.time_since_epoch()).count() / bucket_ms_;
}

void CircuitBreaker::add_to_window(bool failed, Clock::time_point now) {
  std::int64_t index = bucket_index(now);
  // Indices can be negative for a fake clock before the epoch: keep the slot non-negative.
  Bucket& bucket = window_[static_cast<std::size_t>(((index % kBuckets) + kBuckets) % kBuckets)];
  if (bucket.index != index) bucket = Bucket{index, 0, 0};  // a slice that slid out: reuse it
  ++bucket.calls;
  if (failed) ++bucket.failures;
}

void CircuitBreaker::window_totals(Clock::time_point now, int& calls, int& failures) const {
  std::int64_t current = bucket_index(now);
  calls = 0;
  failures = 0;
  for (const Bucket& bucket : window_) {
    if (bucket.index > current - kBuckets && bucket.index <= current) {
      calls += bucket.calls;
      failures += bucket.failures;
    }
  }
}

}  // namespace hengshi::cloud
