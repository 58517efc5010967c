#include "cloud/cloud_metrics.h"

namespace hengshi::cloud {

UpstreamMetrics::UpstreamMetrics(const std::string& pool, const std::string& upstream,
                                 obs::Registry& registry) {
  const char* requests_help = "Calls to cloud upstreams, by outcome (ok or the error kind).";
  auto outcome_labels = [&](const char* outcome) {
    return obs::Labels{{"pool", pool}, {"upstream", upstream}, {"outcome", outcome}};
  };
  const obs::Labels member_labels{{"pool", pool}, {"upstream", upstream}};
  ok_ = &registry.counter("hengshi_upstream_requests_total", requests_help, outcome_labels("ok"));
  for (std::size_t i = 0; i < errors_.size(); ++i) {
    const char* outcome = to_string(static_cast<UpstreamErrorKind>(i));
    errors_[i] = &registry.counter("hengshi_upstream_requests_total", requests_help,
                                   outcome_labels(outcome));
  }
  latency_ = &registry.histogram("hengshi_upstream_latency_seconds",
                                 "Duration of successful upstream calls, seconds.", member_labels);
  ttft_ = &registry.histogram("hengshi_upstream_ttft_seconds",
                              "Time to the first chunk of successful upstream streams, seconds.",
                              member_labels);
  outstanding_ =
      &registry.gauge("hengshi_upstream_outstanding", "Upstream calls in flight.", member_labels);
}

PoolMetrics pool_metrics(const std::string& pool, obs::Registry& registry) {
  PoolMetrics metrics;
  metrics.overloaded =
      &registry.counter("hengshi_pool_overloaded_total",
                        "Calls refused because every member of the pool was at max_concurrent.",
                        {{"pool", pool}});
  metrics.panic = &registry.counter(
      "hengshi_breaker_panic_total",
      "Calls chosen while fewer than panic_threshold of the pool's members allowed calls.",
      {{"pool", pool}});
  metrics.open_share = &registry.gauge(
      "hengshi_pool_members_open_share",
      "Share of the pool's members whose circuit breaker refuses calls (open, or probing).",
      {{"pool", pool}});
  return metrics;
}

}  // namespace hengshi::cloud
