#include "chain/backoff.h"

#include <algorithm>
#include <random>

namespace hengshi::chain {

Jitter Jitter::from_entropy() {
  std::random_device device;
  auto seed = (static_cast<std::uint64_t>(device()) << 32) ^ device();
  return Jitter(seed);
}

double Jitter::next() {
  // splitmix64 (Steele, Lea, Flood 2014): small state, good enough spread for jitter.
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  // The top 53 bits as a double in [0, 1): exactly representable, never 1.0.
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

int max_retries(const RetryConfig& config) {
  return config.enabled ? static_cast<int>(config.backoff_ms.size()) : 0;
}

std::optional<std::int64_t> backoff_wait_ms(const RetryConfig& config, int retry_index,
                                            double unit_draw,
                                            std::optional<std::int64_t> retry_after_ms) {
  if (retry_index < 0 || retry_index >= max_retries(config)) return std::nullopt;
  const std::int64_t cap = std::max<std::int64_t>(0, config.backoff_ms[retry_index]);
  // Full jitter over the whole milliseconds 0..cap, each equally likely; a draw outside [0, 1)
  // from a careless source is clamped rather than trusted.
  const double draw = std::clamp(unit_draw, 0.0, 1.0);
  auto wait = static_cast<std::int64_t>(draw * static_cast<double>(cap + 1));
  wait = std::min(wait, cap);
  if (retry_after_ms) wait = std::max(wait, *retry_after_ms);
  return wait;
}

bool retry_fits(std::int64_t wait_ms, std::int64_t budget_left_ms, std::int64_t min_attempt_ms) {
  if (wait_ms < 0 || budget_left_ms <= 0) return false;
  // Subtraction, not addition: budget_left_ms may be a huge "no deadline" value.
  return budget_left_ms - wait_ms >= std::max<std::int64_t>(0, min_attempt_ms);
}

std::optional<std::int64_t> next_retry_wait_ms(const RetryConfig& config, int retry_index,
                                               std::optional<std::int64_t> retry_after_ms,
                                               std::int64_t budget_left_ms, Jitter& jitter,
                                               std::int64_t min_attempt_ms) {
  if (retry_index < 0 || retry_index >= max_retries(config)) return std::nullopt;
  auto wait = backoff_wait_ms(config, retry_index, jitter.next(), retry_after_ms);
  if (!wait || !retry_fits(*wait, budget_left_ms, min_attempt_ms)) return std::nullopt;
  return wait;
}

}  // namespace hengshi::chain
