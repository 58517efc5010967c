// ResponseBudget: a cap on the upstream response bytes that all calls together hold in memory at
// once (config: cloud.max_in_flight_response_bytes), shared by every pool and member. A call
// reserves what it buffers as it reads — a non-stream body up front when its Content-Length is
// known, then as it grows; a stream its read buffer and pending SSE event — and gives it back when
// the call ends. A reservation that would push the total over the cap fails, and the call fails
// fast as `overloaded` instead of growing the process without bound.
//
// Thread-safety: every method is lock-free and may be called from any thread. The budget must
// outlive every Reservation (clients hold it by shared_ptr). Units: bytes.
#pragma once

#include <atomic>
#include <cstdint>

#include "obs/metrics.h"

namespace hengshi::cloud {

class ResponseBudget {
 public:
  explicit ResponseBudget(std::int64_t max_bytes,
                          obs::Registry& registry = obs::Registry::global());
  ResponseBudget(const ResponseBudget&) = delete;
  ResponseBudget& operator=(const ResponseBudget&) = delete;

  std::int64_t max_bytes() const { return max_bytes_; }
  std::int64_t in_use() const { return in_use_.load(std::memory_order_relaxed); }

  // One call's share. An empty Reservation (no budget) grows without limit.
  class Reservation {
   public:
    explicit Reservation(ResponseBudget* budget = nullptr) : budget_(budget) {}
    ~Reservation() { release(); }
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;

    // Makes this reservation at least `bytes` in total. False, and nothing changes, when the growth
    // would take the budget over its cap.
    bool grow_to(std::int64_t bytes);
    void release();
    std::int64_t bytes() const { return bytes_; }

   private:
    ResponseBudget* budget_;
    std::int64_t bytes_ = 0;
  };

 private:
  bool try_acquire(std::int64_t bytes);
  void give_back(std::int64_t bytes);

  const std::int64_t max_bytes_;
  std::atomic<std::int64_t> in_use_{0};
  obs::Gauge* in_use_gauge_;     // hengshi_upstream_response_bytes_in_flight
  obs::Counter* refused_total_;  // hengshi_upstream_response_budget_refused_total
};

}  // namespace hengshi::cloud
