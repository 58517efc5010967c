// LatencyModel: a lognormal latency distribution fitted from two percentiles, the way
// latency is usually reported (p50, p95). All values are milliseconds.
//   p50 = 0            -> every draw is 0 (an immediate answer)
//   p95 = p50 > 0      -> every draw is p50 (no spread)
//   p95 > p50 > 0      -> lognormal with median p50 and 95th percentile p95
// Draws are capped at kMaxLatencyMs so a far tail cannot park a request for hours.
// Immutable after construction; safe to share between threads.
#pragma once

#include <cstdint>

#include "sim/sim_random.h"

namespace hengshi::sim {

struct LatencyPercentiles {
  double p50_ms = 0;
  double p95_ms = 0;

  bool operator==(const LatencyPercentiles&) const = default;
};

class LatencyModel {
 public:
  static constexpr double kMaxLatencyMs = 600'000;    // 10 minutes
  static constexpr double kZ95 = 1.6448536269514722;  // standard normal 95th percentile

  // Expects validated percentiles (0 <= p50 <= p95, p50 > 0 when p95 > 0); see validate().
  explicit LatencyModel(LatencyPercentiles percentiles);

  // A message naming what is wrong with the percentiles, or empty when they are usable.
  static const char* validate(const LatencyPercentiles& percentiles);

  // Consumes exactly two values of `random` whatever the parameters, so the draws that follow
  // in the same request do not shift when a profile changes from zero to non-zero latency.
  double sample_ms(SimRandom& random) const;

  double mu() const { return mu_; }
  double sigma() const { return sigma_; }

 private:
  bool zero_ = true;
  double mu_ = 0;     // ln(p50)
  double sigma_ = 0;  // (ln(p95) - ln(p50)) / z95
};

}  // namespace hengshi::sim
