#include "edge/llm_sampling.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace hengshi::edge {
namespace {

constexpr int kLanes = 16;  // independent accumulators: lets the compiler use full vectors

// Cephes-style expf: 2^n · e^r with |r| <= ln2/2 and a degree-6 polynomial for e^r.
inline float exp_kernel(float x) {
  x = x > -87.0f ? x : -87.0f;  // also maps NaN to -87
  x = x < 0.0f ? x : 0.0f;
  // Round x·log2(e) to the nearest integer; for y <= 0, trunc(y - 0.5) rounds half away.
  const int n = static_cast<int>(x * 1.44269504088896341f - 0.5f);
  const float nf = static_cast<float>(n);
  const float r = (x - nf * 0.693359375f) + nf * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<std::int32_t>((n + 127) << 23));
  return p * scale;
}

[[gnu::target_clones("avx2", "default")]] float max_of(const float* logits, int count) {
  float lanes[kLanes];
  for (float& lane : lanes) lane = -std::numeric_limits<float>::infinity();
  const int whole = count / kLanes * kLanes;
  for (int i = 0; i < whole; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float v = logits[i + j];
      lanes[j] = v > lanes[j] ? v : lanes[j];  // NaN never wins
    }
  }
  float best = -std::numeric_limits<float>::infinity();
  for (int i = whole; i < count; ++i) best = logits[i] > best ? logits[i] : best;
  for (float lane : lanes) best = lane > best ? lane : best;
  return best;
}

[[gnu::target_clones("avx2", "default")]] float sum_exp_shifted(const float* logits, int count,
                                                                float shift) {
  float lanes[kLanes] = {};
  const int whole = count / kLanes * kLanes;
  for (int i = 0; i < whole; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) lanes[j] += exp_kernel(logits[i + j] - shift);
  }
  float sum = 0.0f;
  for (int i = whole; i < count; ++i) sum += exp_kernel(logits[i] - shift);
  for (float lane : lanes) sum += lane;
  return sum;
}

}  // namespace

float exp_nonpositive(float x) { return exp_kernel(x); }

LogitStats logit_stats(const float* logits, int count) {
  LogitStats stats;
  stats.max_logit = max_of(logits, count);
  if (!std::isfinite(stats.max_logit)) return stats;
  for (int i = 0; i < count; ++i) {
    if (logits[i] == stats.max_logit) {
      stats.argmax = i;
      break;
    }
  }
  stats.log_sum_exp =
      std::log(static_cast<double>(sum_exp_shifted(logits, count, stats.max_logit)));
  return stats;
}

}  // namespace hengshi::edge
