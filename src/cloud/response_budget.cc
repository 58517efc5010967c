#include "cloud/response_budget.h"

namespace hengshi::cloud {

ResponseBudget::ResponseBudget(std::int64_t max_bytes, obs::Registry& registry)
    : max_bytes_(max_bytes),
      in_use_gauge_(&registry.gauge("hengshi_upstream_response_bytes_in_flight",
                                    "Upstream response bytes buffered by calls in flight")),
      refused_total_(&registry.counter("hengshi_upstream_response_budget_refused_total",
                                       "Upstream calls failed because "
                                       "cloud.max_in_flight_response_bytes was spent")) {}

bool ResponseBudget::try_acquire(std::int64_t bytes) {
  std::int64_t current = in_use_.load(std::memory_order_relaxed);
  do {
    if (current + bytes > max_bytes_) {
      refused_total_->inc();
      return false;
    }
  } while (!in_use_.compare_exchange_weak(current, current + bytes, std::memory_order_relaxed));
  in_use_gauge_->inc(static_cast<double>(bytes));
  return true;
}

void ResponseBudget::give_back(std::int64_t bytes) {
  in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  in_use_gauge_->dec(static_cast<double>(bytes));
}

bool ResponseBudget::Reservation::grow_to(std::int64_t bytes) {
  if (bytes <= bytes_) return true;
  if (budget_ != nullptr && !budget_->try_acquire(bytes - bytes_)) return false;
  bytes_ = bytes;
  return true;
}

void ResponseBudget::Reservation::release() {
  if (budget_ != nullptr && bytes_ > 0) budget_->give_back(bytes_);
  bytes_ = 0;
}

}  // namespace hengshi::cloud
