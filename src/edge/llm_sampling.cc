#include "edge/llm_sampling.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace hengshi::edge {
namespace {

// GCC vector extensions: one generic kernel, compiled for SSE2 (4 lanes, any x86-64) and for
// AVX2+FMA (8 lanes), picked once at run time.
typedef float v4f __attribute__((vector_size(16)));
typedef std::int32_t v4i __attribute__((vector_size(16)));
#if defined(__x86_64__)
typedef float v8f __attribute__((vector_size(32)));
typedef std::int32_t v8i __attribute__((vector_size(32)));
#endif

constexpr float kInf = std::numeric_limits<float>::infinity();

template <typename VF>
[[gnu::always_inline]] inline VF splat(float x) {
  return VF{} + x;
}

template <typename VF>
[[gnu::always_inline]] inline VF load(const float* p) {
  VF v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Cephes-style expf for x <= 0: 2^n · e^r with |r| <= ln2/2 and a degree-6 polynomial.
// Arguments below -87 (and NaN) give about 1.6e-38.
template <typename VF, typename VI>
[[gnu::always_inline]] inline VF exp_nonpositive_vec(VF x) {
  x = x > splat<VF>(-87.0f) ? x : splat<VF>(-87.0f);  // NaN compares false: becomes -87
  x = x < splat<VF>(0.0f) ? x : splat<VF>(0.0f);
  // Round x·log2(e) to nearest; for y <= 0, truncating y - 0.5 rounds half away from zero.
  const VI n = __builtin_convertvector(x * 1.44269504088896341f - 0.5f, VI);
  const VF nf = __builtin_convertvector(n, VF);
  const VF r = (x - nf * 0.693359375f) + nf * 2.12194440e-4f;
  VF p = splat<VF>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const VI exponent = (n + 127) << 23;
  return p * std::bit_cast<VF>(exponent);
}

struct MaxArg {
  float max = -kInf;
  int index = 0;
};

// Largest value and its first index; two accumulators per step to hide compare latency.
template <typename VF, typename VI, int kLanes>
[[gnu::always_inline]] inline MaxArg max_arg_impl(const float* logits, int count) {
  VF best0 = splat<VF>(-kInf);
  VF best1 = best0;
  VI at0 = {};
  VI at1 = {};
  VI index{};
  for (int k = 0; k < kLanes; ++k) index[k] = k;
  const int whole = count / (2 * kLanes) * (2 * kLanes);
  for (int i = 0; i < whole; i += 2 * kLanes) {
    const VF a = load<VF>(logits + i);
    const VF b = load<VF>(logits + i + kLanes);
    const VI greater_a = a > best0;  // strict: the earlier index keeps a tie; NaN never wins
    const VI greater_b = b > best1;
    best0 = greater_a ? a : best0;
    at0 = greater_a ? index : at0;
    best1 = greater_b ? b : best1;
    at1 = greater_b ? index + kLanes : at1;
    index += 2 * kLanes;
  }
  MaxArg result;
  auto consider = [&result](float value, int at) {
    if (value > result.max || (value == result.max && at < result.index)) result = {value, at};
  };
  for (int k = 0; k < kLanes; ++k) {
    consider(best0[k], at0[k]);
    consider(best1[k], at1[k]);
  }
  for (int i = whole; i < count; ++i) {
    if (logits[i] > result.max) result = {logits[i], i};
  }
  return result;
}

template <typename VF, typename VI, int kLanes>
[[gnu::always_inline]] inline float sum_exp_impl(const float* logits, int count, float shift) {
  VF sum0 = {};
  VF sum1 = {};
  const int whole = count / (2 * kLanes) * (2 * kLanes);
  for (int i = 0; i < whole; i += 2 * kLanes) {
    sum0 += exp_nonpositive_vec<VF, VI>(load<VF>(logits + i) - shift);
    sum1 += exp_nonpositive_vec<VF, VI>(load<VF>(logits + i + kLanes) - shift);
  }
  const VF lanes = sum0 + sum1;
  float sum = 0.0f;
  for (int k = 0; k < kLanes; ++k) sum += lanes[k];
  for (int i = whole; i < count; ++i) {
    sum += exp_nonpositive_vec<VF, VI>(splat<VF>(logits[i] - shift))[0];
  }
  return sum;
}

MaxArg max_arg_generic(const float* logits, int count) {
  return max_arg_impl<v4f, v4i, 4>(logits, count);
}
float sum_exp_generic(const float* logits, int count, float shift) {
  return sum_exp_impl<v4f, v4i, 4>(logits, count, shift);
}

#if defined(__x86_64__)
[[gnu::target("avx2,fma")]] MaxArg max_arg_avx2(const float* logits, int count) {
  return max_arg_impl<v8f, v8i, 8>(logits, count);
}
[[gnu::target("avx2,fma")]] float sum_exp_avx2(const float* logits, int count, float shift) {
  return sum_exp_impl<v8f, v8i, 8>(logits, count, shift);
}

bool has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#endif

MaxArg max_arg(const float* logits, int count) {
#if defined(__x86_64__)
  if (has_avx2_fma()) return max_arg_avx2(logits, count);
#endif
  return max_arg_generic(logits, count);
}

float sum_exp(const float* logits, int count, float shift) {
#if defined(__x86_64__)
  if (has_avx2_fma()) return sum_exp_avx2(logits, count, shift);
#endif
  return sum_exp_generic(logits, count, shift);
}

}  // namespace

float exp_nonpositive(float x) { return exp_nonpositive_vec<v4f, v4i>(splat<v4f>(x))[0]; }

LogitStats logit_stats(const float* logits, int count) {
  LogitStats stats;
  const MaxArg best = max_arg(logits, count);
  stats.max_logit = best.max;
  stats.argmax = best.index;
  if (std::isnan(stats.max_logit) || stats.max_logit == -kInf) {  // nothing to choose from
    stats.argmax = 0;
    return stats;
  }
  if (stats.max_logit == kInf) return stats;  // certain: log p = 0
  stats.log_sum_exp = std::log(static_cast<double>(sum_exp(logits, count, stats.max_logit)));
  return stats;
}

}  // namespace hengshi::edge
