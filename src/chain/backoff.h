// Backoff: the retry schedule of one chain level — exponential backoff with FULL jitter over
// RetryConfig::backoff_ms (defaults 200, 500, 1000 ms), an upstream's Retry-After as a floor,
// and the check that a retry still fits in the level's budget. All times are milliseconds.
//
// The schedule functions are pure: no clock reads and no hidden randomness — the caller passes a
// uniform draw in [0, 1) (from a Jitter, or any source a test controls) and the time left.
// Jitter is a tiny seedable engine; one instance is not thread-safe (make one per request or
// per thread: it is 8 bytes and costs nothing to create).
#pragma once

#include <cstdint>
#include <optional>

#include "core/chain_config.h"

namespace hengshi::chain {

// An attempt given less than this is not worth starting: it would only time out.
inline constexpr std::int64_t kMinUsefulAttemptMs = 50;

// Uniform doubles in [0, 1) from a 64-bit splitmix sequence; the same seed gives the same draws.
class Jitter {
 public:
  explicit Jitter(std::uint64_t seed) : state_(seed) {}
  // Seeded from std::random_device, for production use.
  static Jitter from_entropy();

  double next();
  double operator()() { return next(); }

 private:
  std::uint64_t state_;
};

// How many retries the schedule allows (0 when retries are disabled).
int max_retries(const RetryConfig& config);

// The wait before retry `retry_index` (0-based): uniform over [0, backoff_ms[k]] (whole ms) by
// `unit_draw` in [0, 1), raised to `retry_after_ms` when the upstream sent one. nullopt when
// there is no such retry (k >= backoff_ms.size(), a negative k, or retries disabled).
std::optional<std::int64_t> backoff_wait_ms(const RetryConfig& config, int retry_index,
                                            double unit_draw,
                                            std::optional<std::int64_t> retry_after_ms = {});

// Whether a retry that first waits `wait_ms` still leaves at least `min_attempt_ms` for the
// attempt itself out of the `budget_left_ms` the level has.
bool retry_fits(std::int64_t wait_ms, std::int64_t budget_left_ms,
                std::int64_t min_attempt_ms = kMinUsefulAttemptMs);

// What the chain asks after a retryable failure: the wait before retry `retry_index`, or
// nullopt for "do not retry" (schedule exhausted, retries disabled, or the wait plus a useful
// attempt does not fit in `budget_left_ms`). Draws from `jitter` only when a retry exists.
std::optional<std::int64_t> next_retry_wait_ms(const RetryConfig& config, int retry_index,
                                               std::optional<std::int64_t> retry_after_ms,
                                               std::int64_t budget_left_ms, Jitter& jitter,
                                               std::int64_t min_attempt_ms = kMinUsefulAttemptMs);

}  // namespace hengshi::chain
