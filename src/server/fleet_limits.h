// FleetLimits: client-key limits (rpm, tpm, budget) that hold across a fleet of gateways sharing
// one Redis (cache.redis). Each key has a one-minute window of requests and of tokens and a spend
// counter in Redis; admit() checks all three and counts the request in one round trip (a Lua
// script, so two instances cannot both take the last slot). charge() adds the answer's tokens and
// cost afterwards (written off the request path).
//
// While Redis is down (or slower than cache.redis.timeout_ms) each instance enforces its share,
// 1 / fleet_size of every limit, with local token buckets (KeyLimits): no request fails because
// of Redis, and the fleet as a whole stays near the limit.
//
// Thread-safety: every method may be called from any thread. Borrows the Redis client, which must
// outlive it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "cache/redis_client.h"
#include "core/asio.h"
#include "server/rate_limiter.h"

namespace hengshi::server {

class FleetLimits {
 public:
  FleetLimits(cache::RedisClient& redis, int fleet_size);

  awaitable<Admission> admit(const ClientKey& key);
  void charge(const ClientKey& key, std::int64_t tokens, double cost);
  // Whether the last check used Redis (false: the local share decided).
  bool shared() const { return shared_.load(); }
  // Wall-clock seconds (tests move it to a window's edge); default: the system clock.
  void use_clock(std::function<std::int64_t()> now_s) { now_s_ = std::move(now_s); }

 private:
  // The key with each limit cut to this instance's share.
  ClientKey local_share(const ClientKey& key) const;

  cache::RedisClient& redis_;
  int fleet_size_;
  KeyLimits local_;
  std::atomic<bool> shared_{false};
  std::function<std::int64_t()> now_s_;
};

}  // namespace hengshi::server
