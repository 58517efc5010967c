// RedisClient: bounded calls to one Redis server (hiredis), for the shared cache tier and the
// fleet-wide key limits. Every call has a deadline (cache.redis.timeout_ms, connect included), so
// a slow or dead Redis costs a request at most that long; after a failure Redis counts as down
// for retry_ms and calls fail at once, without touching the network, until then.
//
// Blocking hiredis calls never run on an I/O thread: async_call() hops to the client's own small
// thread pool and back to the awaiting coroutine's executor. call() blocks the calling thread
// (background threads and the admin path only). Connections are pooled, one per call in flight.
//
// Thread-safety: every method may be called from any thread. The client must outlive its calls;
// its destructor waits for the pool's calls to end (each is bounded by the timeout).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "core/asio.h"
#include "core/cache_config.h"
#include "core/result.h"

struct redisContext;

namespace hengshi::cache {

class CacheMetrics;

struct RedisReply {
  enum class Type { nil, integer, string, array, status };
  Type type = Type::nil;
  long long integer = 0;
  std::string text;  // string / status
  std::vector<RedisReply> elements;
};

class RedisClient {
 public:
  // `metrics` (may be null) counts errors by operation and shows up/down.
  RedisClient(CacheRedisConfig config, CacheMetrics* metrics);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  const CacheRedisConfig& config() const { return config_; }
  // The key prefix every caller puts before its keys.
  const std::string& prefix() const { return config_.prefix; }

  // One command (argv, binary-safe) on the calling thread. Errors: "redis_down" (inside the
  // retry pause), "redis_error" (connection, timeout, or an error reply), naming `op`.
  Result<RedisReply> call(const std::vector<std::string>& argv, std::string_view op);
  // Several commands in one round trip; one reply per command.
  Result<std::vector<RedisReply>> pipeline(const std::vector<std::vector<std::string>>& commands,
                                           std::string_view op);
  // call() on the client's pool, resumed on the awaiting coroutine's executor.
  awaitable<Result<RedisReply>> async_call(std::vector<std::string> argv, std::string op);
  // pipeline() on the pool; nothing waits for it (write-through).
  void post_pipeline(std::vector<std::vector<std::string>> commands, std::string op);

  bool up() const;

  // A fresh, unpooled connection with the client's timeouts (the subscriber's); nullptr on failure.
  redisContext* connect_for_subscribe(std::chrono::milliseconds read_timeout);

 private:
  redisContext* take();
  void give_back(redisContext* context, bool healthy);
  void mark_down(std::string_view op, const std::string& why);
  void mark_up();

  CacheRedisConfig config_;
  CacheMetrics* metrics_;
  std::string password_;
  asio::thread_pool pool_{2};
  std::mutex mutex_;
  std::vector<redisContext*> idle_;
  std::atomic<std::int64_t> down_until_ms_{0};  // steady clock
  std::atomic<bool> up_{false};
  std::atomic<bool> logged_down_{false};
};

}  // namespace hengshi::cache
