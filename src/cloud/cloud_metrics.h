// The cloud layer's metrics, declared in one place (STYLE.md). Each upstream client looks its
// series up once at construction and keeps the references, so a call only does atomic adds.
//
//   hengshi_upstream_requests_total{pool,upstream,outcome}   counter; outcome = ok | <error kind>
//   hengshi_upstream_latency_seconds{pool,upstream}          histogram, successful calls (whole
//                                                            exchange, streams included)
//   hengshi_upstream_ttft_seconds{pool,upstream}             histogram, first chunk of streams
//   hengshi_upstream_outstanding{pool,upstream}              gauge, calls in flight
//   hengshi_pool_overloaded_total{pool}                      counter, calls refused because
//                                                            every member was at max_concurrent
//   hengshi_breaker_panic_total{pool}                        counter, calls chosen while the pool
//                                                            was in panic (breakers ignored)
//   hengshi_pool_members_open_share{pool}                    gauge, share of members whose
//                                                            breaker refuses calls
#pragma once

#include <array>
#include <chrono>
#include <string>

#include "cloud/upstream_error.h"
#include "obs/metrics.h"

namespace hengshi::cloud {

inline constexpr std::size_t kUpstreamErrorKindCount =
    static_cast<std::size_t>(UpstreamErrorKind::circuit_open) + 1;  // the last kind

class UpstreamMetrics {
 public:
  // Registers (or finds) the member's series in `registry`.
  UpstreamMetrics(const std::string& pool, const std::string& upstream,
                  obs::Registry& registry = obs::Registry::global());

  void succeeded(std::chrono::microseconds latency) {
    ok_->inc();
    latency_->observe(std::chrono::duration<double>(latency).count());
  }
  void failed(UpstreamErrorKind kind) { errors_[static_cast<std::size_t>(kind)]->inc(); }
  void first_chunk(std::chrono::microseconds ttft) {
    ttft_->observe(std::chrono::duration<double>(ttft).count());
  }
  void call_started() { outstanding_->inc(); }
  void call_ended() { outstanding_->dec(); }

 private:
  obs::Counter* ok_;
  std::array<obs::Counter*, kUpstreamErrorKindCount> errors_;
  obs::Histogram* latency_;
  obs::Histogram* ttft_;
  obs::Gauge* outstanding_;
};

// One pool's series.
struct PoolMetrics {
  obs::Counter* overloaded = nullptr;
  obs::Counter* panic = nullptr;
  obs::Gauge* open_share = nullptr;
};
PoolMetrics pool_metrics(const std::string& pool, obs::Registry& registry = obs::Registry::global());

}  // namespace hengshi::cloud
