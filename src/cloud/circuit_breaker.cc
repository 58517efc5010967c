#include "cloud/circuit_breaker.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace hengshi::cloud {
namespace {

std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.0f%%", share * 100.0);
  return text;
}

}  // namespace

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
  if (!config_.enabled) return {true, false, false, 0};
  std::lock_guard lock(mutex_);
  advance(now);
  switch (state_) {
    case BreakerState::closed:
      return {true, false, false, generation_};
    case BreakerState::open:
      return {false, false, false, generation_};
    case BreakerState::half_open:
      if (probe_in_flight_) return {false, false, false, generation_};
      probe_in_flight_ = true;
      return {true, true, false, generation_};
  }
  return {};
}

Admission CircuitBreaker::allow_in_panic(Clock::time_point now) {
  Admission admission = allow(now);
  if (admission) return admission;
  std::lock_guard lock(mutex_);
  return {true, false, true, generation_};
}

bool CircuitBreaker::would_allow(Clock::time_point now) {
  if (!config_.enabled) return true;
  std::lock_guard lock(mutex_);
  advance(now);
  return state_ == BreakerState::closed || (state_ == BreakerState::half_open && !probe_in_flight_);
}

void CircuitBreaker::record(const Admission& admission, const CallReport& report,
                            Clock::time_point now, const WindowTotals* peers) {
  if (!admission.allowed) return;
  std::lock_guard lock(mutex_);
  // The stream memory is about the member, whatever the breaker's state (or whether it is on).
  if (report.stream && report.outcome != CallOutcome::ignored) {
    add(streams_, report.broke_midway, now);
    if (report.outcome == CallOutcome::success) finished_a_stream_ = true;
  }
  if (!config_.enabled) return;
  advance(now);
  if (admission.generation != generation_) return;  // decided under a state that has passed
  if (admission.panic) {
    // Only the pool's panic let this call through: a success is the proof the member is back.
    if (report.outcome == CallOutcome::success && state_ != BreakerState::closed) {
      transition(BreakerState::closed, now, "a call made while its pool was in panic succeeded");
    }
    return;
  }
  if (state_ == BreakerState::half_open) {
    if (!admission.probe) return;
    probe_in_flight_ = false;
    if (report.outcome == CallOutcome::success) {
      transition(BreakerState::closed, now, "the probe call succeeded");
    } else if (report.outcome == CallOutcome::failure) {
      open(now, "the probe call failed");
    }
    return;  // ignored: the next caller probes instead
  }
  if (state_ != BreakerState::closed || report.outcome == CallOutcome::ignored) return;
  const bool failed = report.outcome == CallOutcome::failure;
  add(window_, failed, now);
  if (!failed) {
    consecutive_failures_ = 0;
    consecutive_outage_failures_ = 0;
    return;
  }
  ++consecutive_failures_;
  consecutive_outage_failures_ = report.outage ? consecutive_outage_failures_ + 1 : 0;
  std::string why = opening_reason(report, now, peers);
  if (!why.empty()) open(now, why);
}

std::string CircuitBreaker::opening_reason(const CallReport& report, Clock::time_point now,
                                           const WindowTotals* peers) const {
  if (report.outage && config_.consecutive_outage_failures > 0 &&
      consecutive_outage_failures_ >= config_.consecutive_outage_failures) {
    return std::to_string(consecutive_outage_failures_) + " connect failures / timeouts in a row";
  }
  if (config_.consecutive_failures > 0 && consecutive_failures_ >= config_.consecutive_failures) {
    return std::to_string(consecutive_failures_) + " failures in a row";
  }
  const WindowTotals mine = totals(window_, now);
  if (mine.calls < std::max(1, config_.min_calls)) return {};
  const double share = static_cast<double>(mine.failures) / mine.calls;
  // A small epsilon so that e.g. 10 of 20 meets 0.5 whatever the rounding.
  if (share < config_.failure_ratio - 1e-9) return {};
  std::string why = std::to_string(mine.failures) + " of " + std::to_string(mine.calls) +
                    " calls failed in the window (" + percent(share) + ")";
  if (peers != nullptr && peers->calls >= std::max(1, config_.min_calls)) {
    const double peer_share = static_cast<double>(peers->failures) / peers->calls;
    if (share < peer_share + config_.outlier_margin - 1e-9) return {};  // the pool shares it
    why += ", the pool's other members " + percent(peer_share);
  }
  return why;
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
  auto left = opened_at_ + open_for_ - now;
  // Rounded up: a Retry-After built from it must not invite a call that is still refused.
  return std::max(Millis(1), std::chrono::ceil<Millis>(left));
}

Millis CircuitBreaker::open_duration() {
  std::lock_guard lock(mutex_);
  return open_for_;
}

WindowTotals CircuitBreaker::window(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  return totals(window_, now);
}

bool CircuitBreaker::stream_flaky(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  if (!finished_a_stream_) return true;
  return totals(streams_, now).failures > 0;
}

void CircuitBreaker::advance(Clock::time_point now) {
  if (state_ == BreakerState::open && now - opened_at_ >= open_for_) {
    transition(BreakerState::half_open, now, "the cool-down passed; one probe call is allowed");
  }
}

void CircuitBreaker::open(Clock::time_point now, const std::string& why) {
  // An opening "in a row" is one that follows the last within a window of staying closed.
  if (state_ == BreakerState::closed && now - closed_at_ >= Millis(config_.window_ms)) {
    openings_in_a_row_ = 0;
  }
  openings_in_a_row_ = std::min(openings_in_a_row_ + 1, 30);
  const std::int64_t base = std::max<std::int64_t>(1, config_.open_ms);
  const std::int64_t cap = std::max(base, config_.max_open_ms);
  std::int64_t cool_down = base;
  for (int k = 1; k < openings_in_a_row_ && cool_down < cap; ++k) cool_down *= 2;
  open_for_ = Millis(std::min(cool_down, cap));
  transition(BreakerState::open, now, why);
}

void CircuitBreaker::transition(BreakerState to, Clock::time_point now, const std::string& why) {
  state_ = to;
  ++generation_;
  probe_in_flight_ = false;
  consecutive_failures_ = 0;
  consecutive_outage_failures_ = 0;
  state_gauge_->set(static_cast<double>(static_cast<int>(to)));
  switch (to) {
    case BreakerState::open:
      opened_at_ = now;
      to_open_->inc();
      spdlog::warn("pool '{}' upstream '{}': circuit breaker opened for {} ms ({}; opening {} in a "
                   "row)",
                   pool_, upstream_, open_for_.count(), why, openings_in_a_row_);
      break;
    case BreakerState::half_open:
      to_half_open_->inc();
      spdlog::info("pool '{}' upstream '{}': circuit breaker half-open ({})", pool_, upstream_,
                   why);
      break;
    case BreakerState::closed:
      window_.fill(Bucket{});
      closed_at_ = now;
      to_closed_->inc();
      spdlog::info("pool '{}' upstream '{}': circuit breaker closed ({})", pool_, upstream_, why);
      break;
  }
}

std::int64_t CircuitBreaker::bucket_index(Clock::time_point now) const {
  return std::chrono::duration_cast<Millis>(now.time_since_epoch()).count() / bucket_ms_;
}

void CircuitBreaker::add(Ring& ring, bool failed, Clock::time_point now) {
  std::int64_t index = bucket_index(now);
  // Indices can be negative for a fake clock before the epoch: keep the slot non-negative.
  Bucket& bucket = ring[static_cast<std::size_t>(((index % kBuckets) + kBuckets) % kBuckets)];
  if (bucket.index != index) bucket = Bucket{index, 0, 0};  // a slice that slid out: reuse it
  ++bucket.calls;
  if (failed) ++bucket.failures;
}

WindowTotals CircuitBreaker::totals(const Ring& ring, Clock::time_point now) const {
  std::int64_t current = bucket_index(now);
  WindowTotals out;
  for (const Bucket& bucket : ring) {
    if (bucket.index > current - kBuckets && bucket.index <= current) {
      out.calls += bucket.calls;
      out.failures += bucket.failures;
    }
  }
  return out;
}

}  // namespace hengshi::cloud
