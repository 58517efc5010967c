// Bulkhead: bounded concurrency for one cloud pool, with a bounded FIFO queue, so long cloud calls
// cannot take every connection's worth of resources (DESIGN-NOTES "The chain", issue 9 §6).
//
// acquire() returns a Permit at once while fewer than max_concurrent are held; otherwise the caller
// queues (at most max_queue waiters, first come first served) for at most min(max_queue_wait_ms,
// the call's deadline). A full queue or a wait that runs out fails fast with
// UpstreamErrorKind::overloaded (retry_after_ms 1000, the message names the pool and "bulkhead"); a
// cancelled CancelToken ends the wait with UpstreamErrorKind::cancelled and frees the queue slot. A
// released permit passes straight to the oldest waiter (no barging).
//
// Metrics (declared here, in one place):
//   hengshi_bulkhead_in_use{pool}          gauge, permits held
//   hengshi_bulkhead_queued{pool}          gauge, callers waiting for a permit
//   hengshi_bulkhead_rejected_total{pool}  counter, calls refused (queue full or wait ran out)
//
// Thread-safety: acquire() and Permit release may run concurrently on any executors; the state is
// guarded by a mutex and a waiter is woken by posting to its own executor (no busy waiting). As
// with CancelToken, acquire() must be awaited on a strand (or a single-threaded executor): the
// waiter's timer is only touched from the executor it waits on. The bulkhead must outlive every
// Permit and every pending acquire().
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "cloud/upstream_error.h"
#include "core/asio.h"
#include "core/cancel_token.h"
#include "core/chain_config.h"
#include "core/deadline.h"
#include "core/result.h"
#include "obs/metrics.h"

namespace hengshi::cloud {

class Bulkhead {
 public:
  static constexpr std::int64_t kRetryAfterMs = 1000;  // suggested to a refused caller

  // RAII: releases its permit when destroyed (every path: return, exception, cancellation).
  class Permit {
   public:
    Permit() = default;
    Permit(Permit&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Permit& operator=(Permit&& other) noexcept;
    Permit(const Permit&) = delete;
    Permit& operator=(const Permit&) = delete;
    ~Permit() { reset(); }

    bool held() const { return owner_ != nullptr; }
    void reset();  // releases now

   private:
    friend class Bulkhead;
    explicit Permit(Bulkhead* owner) : owner_(owner) {}
    Bulkhead* owner_ = nullptr;
  };

  // `pool` labels the metrics and the error messages. max_concurrent < 1 counts as 1, max_queue < 0
  // as 0.
  Bulkhead(std::string pool, BulkheadConfig config,
           obs::Registry& registry = obs::Registry::global());
  ~Bulkhead();
  Bulkhead(const Bulkhead&) = delete;
  Bulkhead& operator=(const Bulkhead&) = delete;

  // Must be awaited on the strand that owns `cancel`.
  awaitable<Result<Permit, UpstreamError>> acquire(Deadline deadline, CancelToken cancel);
  // A permit at once when one is free and nobody queues, without a coroutine (the common case);
  // else an empty one, and acquire() waits or refuses.
  Permit try_acquire();

  int in_use() const;
  int queued() const;
  const BulkheadConfig& config() const { return config_; }

 private:
  struct Waiter;

  // Under mutex_: takes a permit when one of `limit` is free and nobody queues.
  bool take_free_locked(int limit);
  void release();
  UpstreamError rejected(std::string why);

  const std::string pool_;
  const BulkheadConfig config_;
  obs::Gauge* in_use_gauge_;
  obs::Gauge* queued_gauge_;
  obs::Counter* rejected_total_;

  mutable std::mutex mutex_;
  int in_use_ = 0;
  std::deque<std::shared_ptr<Waiter>> queue_;
};

}  // namespace hengshi::cloud
