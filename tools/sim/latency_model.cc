#include "sim/latency_model.h"

#include <algorithm>
#include <cmath>

namespace hengshi::sim {

LatencyModel::LatencyModel(LatencyPercentiles percentiles) {
  if (percentiles.p50_ms <= 0) return;
  zero_ = false;
  mu_ = std::log(percentiles.p50_ms);
  double p95 = std::max(percentiles.p95_ms, percentiles.p50_ms);
  sigma_ = (std::log(p95) - mu_) / kZ95;
}

const char* LatencyModel::validate(const LatencyPercentiles& percentiles) {
  if (!std::isfinite(percentiles.p50_ms) || !std::isfinite(percentiles.p95_ms)) {
    return "p50 and p95 must be finite numbers";
  }
  if (percentiles.p50_ms < 0 || percentiles.p95_ms < 0) return "p50 and p95 must be >= 0";
  if (percentiles.p50_ms > kMaxLatencyMs || percentiles.p95_ms > kMaxLatencyMs) {
    return "p50 and p95 must be <= 600000 (10 minutes)";
  }
  if (percentiles.p95_ms < percentiles.p50_ms) return "p95 must be >= p50";
  if (percentiles.p50_ms == 0 && percentiles.p95_ms > 0) {
    return "p50 must be > 0 when p95 > 0 (a lognormal has a positive median)";
  }
  return "";
}

double LatencyModel::sample_ms(SimRandom& random) const {
  double z = random.standard_normal();
  if (zero_) return 0;
  return std::min(kMaxLatencyMs, std::exp(mu_ + sigma_ * z));
}

}  // namespace hengshi::sim
