#include "cloud/bulkhead.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace hengshi::cloud {

// One queued caller. Shared by the queue (to be granted) and the waiting coroutine; `timer` is only
// touched on `executor`, where the waiting coroutine runs.
struct Bulkhead::Waiter {
  explicit Waiter(asio::any_io_executor ex) : executor(ex), timer(ex) {}
  asio::any_io_executor executor;
  asio::steady_timer timer;
  bool granted = false;  // guarded by Bulkhead::mutex_: the permit now belongs to this waiter
};

Bulkhead::Permit& Bulkhead::Permit::operator=(Permit&& other) noexcept {
  if (this != &other) {
    reset();
    owner_ = std::exchange(other.owner_, nullptr);
  }
  return *this;
}

void Bulkhead::Permit::reset() {
  if (Bulkhead* owner = std::exchange(owner_, nullptr)) owner->release();
}

Bulkhead::Bulkhead(std::string pool, BulkheadConfig config, obs::Registry& registry)
    : pool_(std::move(pool)), config_(std::move(config)) {
  const obs::Labels labels{{"pool", pool_}};
  in_use_gauge_ = &registry.gauge(
      "hengshi_bulkhead_in_use", "Bulkhead permits held (cloud calls admitted), per pool.", labels);
  queued_gauge_ = &registry.gauge("hengshi_bulkhead_queued",
                                  "Calls waiting in the bulkhead queue, per pool.", labels);
  rejected_total_ = &registry.counter(
      "hengshi_bulkhead_rejected_total",
      "Calls refused by the bulkhead (queue full or queue wait ran out), per pool.", labels);
}

// The gauges move by inc/dec, never set(): a pool rebuilt on reload shares its series with the old
// one while the old one's calls finish, and the sum is the truth.
Bulkhead::~Bulkhead() = default;

int Bulkhead::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

int Bulkhead::queued() const {
  std::lock_guard lock(mutex_);
  return static_cast<int>(queue_.size());
}

UpstreamError Bulkhead::rejected(std::string why) {
  rejected_total_->inc();
  UpstreamError error;
  error.kind = UpstreamErrorKind::overloaded;
  error.message = "pool '" + pool_ + "' bulkhead: " + why;
  error.retry_after_ms = kRetryAfterMs;
  return error;
}

bool Bulkhead::take_free_locked(int limit) {
  if (in_use_ >= limit || !queue_.empty()) return false;
  ++in_use_;
  in_use_gauge_->inc();
  return true;
}

Bulkhead::Permit Bulkhead::try_acquire() {
  std::lock_guard lock(mutex_);
  return take_free_locked(std::max(1, config_.max_concurrent)) ? Permit(this) : Permit();
}

awaitable<Result<Bulkhead::Permit, UpstreamError>> Bulkhead::acquire(Deadline deadline,
                                                                     CancelToken cancel) {
  if (cancel.cancelled()) {
    UpstreamError error;
    error.kind = UpstreamErrorKind::cancelled;
    error.message = "cancelled before the pool '" + pool_ + "' bulkhead admitted the call";
    co_return error;
  }
  const int limit = std::max(1, config_.max_concurrent);
  const auto max_queue = static_cast<std::size_t>(std::max(0, config_.max_queue));
  const Millis max_wait(std::max<std::int64_t>(0, config_.max_queue_wait_ms));
  const Clock::time_point wait_until = std::min(deadline.at(), Clock::now() + max_wait);

  asio::any_io_executor executor = co_await asio::this_coro::executor;
  std::shared_ptr<Waiter> waiter;
  {
    std::lock_guard lock(mutex_);
    if (take_free_locked(limit)) co_return Permit(this);
    if (queue_.size() >= max_queue) {
      co_return rejected("queue full (" + std::to_string(max_queue) + " waiting, " +
                         std::to_string(limit) + " in use)");
    }
    if (wait_until <= Clock::now()) {
      co_return rejected("no permit free and no time left to wait");
    }
    waiter = std::make_shared<Waiter>(executor);
    waiter->timer.expires_at(wait_until);
    queue_.push_back(waiter);
    queued_gauge_->inc();
  }

  bool cancelled = false;
  // The callback runs on this strand (CancelToken's rule), like the timer's owner.
  auto registration = cancel.on_cancel([&cancelled, waiter] {
    cancelled = true;
    waiter->timer.cancel();
  });
  if (!cancelled) {
    // A grant that happened between queueing and here posted its wake-up to this executor; it
    // cannot run before the wait below starts, because this coroutine holds the strand.
    boost::system::error_code ec;
    co_await waiter->timer.async_wait(asio::redirect_error(use_awaitable, ec));
  }

  bool granted = false;
  {
    std::lock_guard lock(mutex_);
    granted = waiter->granted;
    if (!granted) {
      auto it = std::find(queue_.begin(), queue_.end(), waiter);
      if (it != queue_.end()) {
        queue_.erase(it);
        queued_gauge_->dec();
      }
    }
  }
  if (granted) {
    Permit permit(this);  // released at once below when the caller is gone
    if (!cancelled) co_return std::move(permit);
  }
  if (cancelled) {
    UpstreamError error;
    error.kind = UpstreamErrorKind::cancelled;
    error.message = "cancelled while waiting in the pool '" + pool_ + "' bulkhead queue";
    co_return error;
  }
  co_return rejected("no permit within " + std::to_string(max_wait.count()) +
                     " ms (or the call's deadline)");
}

void Bulkhead::release() {
  std::shared_ptr<Waiter> next;
  {
    std::lock_guard lock(mutex_);
    if (queue_.empty()) {
      --in_use_;
      in_use_gauge_->dec();
      return;
    }
    // The permit passes to the oldest waiter: in_use_ is unchanged.
    next = std::move(queue_.front());
    queue_.pop_front();
    next->granted = true;
    queued_gauge_->dec();
  }
  asio::post(next->executor, [next] { next->timer.cancel(); });
}

}  // namespace hengshi::cloud
