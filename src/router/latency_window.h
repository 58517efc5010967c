// Latency figures the router's latency gate reads: a sliding-window quantile (P90 over the last
// 5 minutes) per cloud pool, and the edge model's measured speed.
//
// Both are thread-safe (one mutex each; observe and read are O(histogram) at worst, no
// allocation). Time is passed in, never read, so tests need no sleeps. All durations are in
// milliseconds.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <vector>

namespace hengshi::router {

// Quantiles of values observed in the last `window`, from a ring of `slot`-long time slots, each
// a fixed log-scale histogram over [kMinMs, kMaxMs] (values outside are clamped to the ends).
// Every bucket spans a factor kBucketGrowth, and the estimate lands in the bucket holding the
// exact order statistic, so within range its relative error is below kBucketGrowth − 1 (4%).
// The window moves a slot at a time: a sample counts for between window − slot and window.
class SlidingQuantile {
 public:
  static constexpr double kMinMs = 0.1;
  static constexpr double kMaxMs = 600'000;  // 10 minutes
  static constexpr double kBucketGrowth = 1.04;

  explicit SlidingQuantile(std::chrono::seconds window = std::chrono::minutes(5),
                           std::chrono::seconds slot = std::chrono::seconds(10));

  // Negative and NaN values are ignored; a sample older than the slot now held in its ring
  // position is dropped.
  void observe(double value_ms, std::chrono::steady_clock::time_point now);

  // q in [0, 1] (clamped): the value at rank floor(q · n) of the n live samples, interpolated
  // log-linearly inside its bucket. nullopt when the window holds no sample.
  std::optional<double> quantile(double q, std::chrono::steady_clock::time_point now) const;

  std::size_t count(std::chrono::steady_clock::time_point now) const;

 private:
  struct Slot {
    std::int64_t epoch = kUnused;  // slot number: floor(time since the clock's epoch / slot)
    std::uint64_t total = 0;
    std::vector<std::uint32_t> counts;  // per bucket
  };
  static constexpr std::int64_t kUnused = std::numeric_limits<std::int64_t>::min();

  std::int64_t epoch_of(std::chrono::steady_clock::time_point now) const;
  // In the window ending at now_epoch. A slot a little ahead of `now` (callers' clocks read
  // moments apart) counts as live.
  bool live(const Slot& slot, std::int64_t now_epoch) const;

  std::chrono::steady_clock::duration slot_;
  mutable std::mutex mutex_;
  std::vector<Slot> slots_;                    // ring: epoch e lives at e mod slots_.size()
  mutable std::vector<std::uint64_t> merged_;  // scratch for quantile(), guarded by mutex_
};

// Exponentially weighted moving averages of the edge model's time to first token and decode
// speed, seeded with configured values. alpha is the weight of each new observation.
class EdgeSpeed {
 public:
  // Non-positive or non-finite seeds fall back to 1 ms / 1 token/s (never divides by zero);
  // alpha outside (0, 1] falls back to 0.2.
  EdgeSpeed(double initial_ttft_ms, double initial_tokens_per_s, double alpha = 0.2);

  // `tokens` generated in `generation_ms` after the first token. A non-finite or negative ttft
  // is ignored; the decode speed is updated only when tokens > 0 and generation_ms > 0.
  void observe(double ttft_ms, int tokens, double generation_ms);

  // ttft + expected_tokens / tokens_per_s · 1000 (negative token counts count as 0).
  double estimate_ms(int expected_tokens) const;
  double ttft_ms() const;
  double tokens_per_s() const;

 private:
  double alpha_;
  mutable std::mutex mutex_;
  double ttft_ms_;
  double tokens_per_s_;
};

}  // namespace hengshi::router
