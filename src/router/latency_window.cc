#include "router/latency_window.h"

#include <algorithm>
#include <cmath>

namespace hengshi::router {
namespace {

const double kLogGrowth = std::log(SlidingQuantile::kBucketGrowth);
// Enough buckets for kMinMs · growth^(n−1) to reach kMaxMs.
const std::size_t kBucketCount =
    static_cast<std::size_t>(
        std::ceil(std::log(SlidingQuantile::kMaxMs / SlidingQuantile::kMinMs) / kLogGrowth)) +
    1;

std::size_t bucket_of(double value_ms) {
  if (value_ms <= SlidingQuantile::kMinMs) return 0;
  const double index = std::floor(std::log(value_ms / SlidingQuantile::kMinMs) / kLogGrowth);
  return std::min(static_cast<std::size_t>(index), kBucketCount - 1);
}

// kMinMs · growth^position; position may be fractional (interpolation inside a bucket).
double bucket_value(double position) {
  return SlidingQuantile::kMinMs * std::exp(position * kLogGrowth);
}

std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  const std::int64_t quotient = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? quotient - 1 : quotient;
}

std::int64_t floor_mod(std::int64_t a, std::int64_t b) { return a - floor_div(a, b) * b; }

}  // namespace

SlidingQuantile::SlidingQuantile(std::chrono::seconds window, std::chrono::seconds slot)
    : slot_(std::max(slot, std::chrono::seconds(1))), merged_(kBucketCount, 0) {
  const auto slot_seconds = std::chrono::duration_cast<std::chrono::seconds>(slot_).count();
  const auto slot_count =
      std::max<std::int64_t>(1, (window.count() + slot_seconds - 1) / slot_seconds);
  slots_.resize(static_cast<std::size_t>(slot_count));
  for (Slot& each : slots_) each.counts.assign(kBucketCount, 0);
}

std::int64_t SlidingQuantile::epoch_of(std::chrono::steady_clock::time_point now) const {
  return floor_div(now.time_since_epoch().count(), slot_.count());
}

bool SlidingQuantile::live(const Slot& slot, std::int64_t now_epoch) const {
  return slot.total > 0 && slot.epoch != kUnused &&
         slot.epoch > now_epoch - static_cast<std::int64_t>(slots_.size());
}

void SlidingQuantile::observe(double value_ms, std::chrono::steady_clock::time_point now) {
  if (!(value_ms >= 0)) return;  // negative or NaN
  const std::int64_t epoch = epoch_of(now);
  const std::size_t bucket = bucket_of(value_ms);
  std::lock_guard lock(mutex_);
  Slot& slot =
      slots_[static_cast<std::size_t>(floor_mod(epoch, static_cast<std::int64_t>(slots_.size())))];
  if (slot.epoch != epoch) {
    if (slot.epoch != kUnused && slot.epoch > epoch) return;  // a newer slot took its place
    std::fill(slot.counts.begin(), slot.counts.end(), 0);
    slot.total = 0;
    slot.epoch = epoch;
  }
  ++slot.counts[bucket];
  ++slot.total;
}

std::size_t SlidingQuantile::count(std::chrono::steady_clock::time_point now) const {
  const std::int64_t now_epoch = epoch_of(now);
  std::lock_guard lock(mutex_);
  std::uint64_t total = 0;
  for (const Slot& slot : slots_) {
    if (live(slot, now_epoch)) total += slot.total;
  }
  return static_cast<std::size_t>(total);
}

std::optional<double> SlidingQuantile::quantile(double q,
                                                std::chrono::steady_clock::time_point now) const {
  q = std::isnan(q) ? 0.5 : std::clamp(q, 0.0, 1.0);
  const std::int64_t now_epoch = epoch_of(now);
  std::lock_guard lock(mutex_);
  std::fill(merged_.begin(), merged_.end(), 0);
  std::uint64_t total = 0;
  for (const Slot& slot : slots_) {
    if (!live(slot, now_epoch)) continue;
    total += slot.total;
    for (std::size_t i = 0; i < kBucketCount; ++i) merged_[i] += slot.counts[i];
  }
  if (total == 0) return std::nullopt;

  // The sample of rank floor(q · n) (0-based) lies in the bucket where the cumulative count
  // passes it; its position among that bucket's samples places it inside the bucket.
  const double rank =
      std::min(std::floor(q * static_cast<double>(total)), static_cast<double>(total - 1));
  std::uint64_t below = 0;
  for (std::size_t i = 0; i < kBucketCount; ++i) {
    if (merged_[i] == 0) continue;
    if (rank < static_cast<double>(below + merged_[i])) {
      const double fraction =
          (rank - static_cast<double>(below) + 0.5) / static_cast<double>(merged_[i]);
      return std::min(bucket_value(static_cast<double>(i) + fraction), kMaxMs);
    }
    below += merged_[i];
  }
  return kMaxMs;  // not reached: rank < total
}

EdgeSpeed::EdgeSpeed(double initial_ttft_ms, double initial_tokens_per_s, double alpha)
    : alpha_(alpha > 0 && alpha <= 1 ? alpha : 0.2),
      ttft_ms_(std::isfinite(initial_ttft_ms) && initial_ttft_ms > 0 ? initial_ttft_ms : 1.0),
      tokens_per_s_(std::isfinite(initial_tokens_per_s) && initial_tokens_per_s > 0
                        ? initial_tokens_per_s
                        : 1.0) {}

void EdgeSpeed::observe(double ttft_ms, int tokens, double generation_ms) {
  std::lock_guard lock(mutex_);
  if (std::isfinite(ttft_ms) && ttft_ms >= 0) ttft_ms_ += alpha_ * (ttft_ms - ttft_ms_);
  if (tokens > 0 && std::isfinite(generation_ms) && generation_ms > 0) {
    const double measured = tokens / (generation_ms / 1000.0);
    tokens_per_s_ += alpha_ * (measured - tokens_per_s_);
  }
}

double EdgeSpeed::estimate_ms(int expected_tokens) const {
  std::lock_guard lock(mutex_);
  return ttft_ms_ + std::max(expected_tokens, 0) / tokens_per_s_ * 1000.0;
}

double EdgeSpeed::ttft_ms() const {
  std::lock_guard lock(mutex_);
  return ttft_ms_;
}

double EdgeSpeed::tokens_per_s() const {
  std::lock_guard lock(mutex_);
  return tokens_per_s_;
}

}  // namespace hengshi::router
