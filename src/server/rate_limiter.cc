#include "server/rate_limiter.h"

#include <algorithm>
#include <cmath>

namespace hengshi::server {

void TokenBucket::refill(LimitClock::time_point now) {
  if (now <= updated_) return;
  const double seconds = std::chrono::duration<double>(now - updated_).count();
  level_ = std::min(per_minute_, level_ + seconds * per_minute_ / 60.0);
  updated_ = now;
}

void TokenBucket::set_rate(double per_minute, LimitClock::time_point now) {
  if (!started_) {
    started_ = true;
    per_minute_ = per_minute;
    level_ = per_minute;
    updated_ = now;
    return;
  }
  refill(now);
  // What was used this minute stays used: a lowered limit applies at once, a raised one adds room.
  level_ = std::min(level_ + (per_minute - per_minute_), per_minute);
  per_minute_ = per_minute;
}

double TokenBucket::level(LimitClock::time_point now) {
  refill(now);
  return level_;
}

void TokenBucket::take(double amount, LimitClock::time_point now) {
  refill(now);
  level_ -= amount;
}

std::int64_t TokenBucket::seconds_until(double wanted, LimitClock::time_point now) {
  refill(now);
  if (level_ >= wanted || per_minute_ <= 0) return 1;
  const double seconds = (wanted - level_) * 60.0 / per_minute_;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(seconds)));
}

Admission KeyLimits::admit(const ClientKey& key, LimitClock::time_point now) {
  std::lock_guard lock(mutex_);
  State& state = states_[key.name];
  if (key.budget && state.spent >= *key.budget) return {false, "budget", 0};
  if (key.tpm > 0) {
    state.tokens.set_rate(static_cast<double>(key.tpm), now);
    // Tokens are charged after the answer: refuse only once earlier answers used the minute up.
    if (state.tokens.level(now) <= 0) return {false, "tpm", state.tokens.seconds_until(1, now)};
  }
  if (key.rpm > 0) {
    state.requests.set_rate(static_cast<double>(key.rpm), now);
    if (state.requests.level(now) < 1) return {false, "rpm", state.requests.seconds_until(1, now)};
    state.requests.take(1, now);
  }
  return {};
}

void KeyLimits::charge(const ClientKey& key, std::int64_t tokens, double cost,
                       LimitClock::time_point now) {
  std::lock_guard lock(mutex_);
  State& state = states_[key.name];
  state.spent += cost;
  if (key.tpm > 0) {
    state.tokens.set_rate(static_cast<double>(key.tpm), now);
    state.tokens.take(static_cast<double>(tokens), now);
  }
}

double KeyLimits::spent(const std::string& key_name) const {
  std::lock_guard lock(mutex_);
  auto it = states_.find(key_name);
  return it == states_.end() ? 0.0 : it->second.spent;
}

}  // namespace hengshi::server
