// RedisTier: the cache tier a fleet of gateways shares (cache.redis). In Redis, under the prefix:
//   e:<id>     hash: "m" the entry as JSON, "v" its vector (raw floats), "k" its exact key;
//              expires with the entry (TTL + stale_if_error_s)
//   k:<key>    the id of the entry answering that exact key
//   t:<tag>    the ids carrying a tag (for invalidation)
//   events     pub/sub channel: "fill <id>", "invalidate <tags as JSON>", "clear"
// Writes go through (a fill is stored and announced in one round trip, off the request path); a
// local exact miss reads k: + e: in one round trip (a script); every instance subscribes to the
// channel, indexes the entries others fill and drops what others invalidate, within the
// subscriber's read loop (well under a second); at start an instance loads what Redis holds
// into its local tier (bounded by its own capacity).
//
// Thread-safety: as RedisClient; the subscriber runs on its own thread between start() and
// stop().
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache_entry.h"
#include "cache/redis_client.h"
#include "core/asio.h"

namespace hengshi::cache {

class AnswerCache;
class CacheMetrics;

class RedisTier {
 public:
  explicit RedisTier(CacheRedisConfig config);
  ~RedisTier();
  RedisTier(const RedisTier&) = delete;
  RedisTier& operator=(const RedisTier&) = delete;

  // Wires the tier to its cache (called by AnswerCache's constructor).
  void attach(AnswerCache& cache, CacheMetrics& metrics);
  void start();
  void stop();
  bool up() const { return client_ && client_->up(); }
  RedisClient& client() { return *client_; }

  awaitable<std::optional<std::shared_ptr<CacheEntry>>> fetch_by_key(std::uint64_t key);
  // Write-through of a new entry (returns at once; the write runs on the client's pool).
  void store(const std::shared_ptr<const CacheEntry>& entry, std::int64_t stale_s);
  // Removes the tagged entries from Redis and tells every instance; returns how many Redis held.
  std::size_t invalidate(const std::vector<std::string>& tags);
  std::size_t invalidate_all();

  // The entry as stored in Redis ("m" field), and back.
  static std::string to_json_text(const CacheEntry& entry);
  static std::optional<std::shared_ptr<CacheEntry>> from_stored(const std::string& json_text,
                                                                const std::string& vector_bytes);

 private:
  void subscriber_loop();
  void load_all();
  void on_event(const std::string& message);
  std::optional<std::shared_ptr<CacheEntry>> fetch_by_id(const std::string& id_hex);

  CacheRedisConfig config_;
  std::unique_ptr<RedisClient> client_;
  AnswerCache* cache_ = nullptr;
  std::thread subscriber_;
  std::atomic<bool> stopping_{false};
  std::mutex subscriber_mutex_;
  int subscriber_fd_ = -1;  // the subscriber's socket while it reads (for stop())
  std::string instance_;  // tags this instance's own events, so it skips their echo
};

}  // namespace hengshi::cache
