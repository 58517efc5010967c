// AnswerCache: answers the gateway already gave, reused for the same question (exact tier) or a
// question that means the same (semantic tier), within the same scope (cache_key.h). A wrong hit
// is worse than a miss: a semantic hit needs the scope, the cosine threshold of its task type and
// every hit guard (hit_guards.h). Expired entries are kept stale_if_error_s longer, for the chain's
// last resort (stale()).
//
// Memory is bounded in two buckets, each in entries and in bytes: *hot* holds recent entries in
// LRU order (at most hot_window_s since their last use); what falls out of hot, or ages, moves to
// *cold*, which evicts its coldest entry first (hits × recency, among a random sample, as Redis
// does for LFU). A hit in cold moves the entry back to hot. The semantic index (one per scope)
// follows the entries and is rebuilt once its tombstones pass a share of it.
//
// With a shared tier (redis_tier.h) entries are written through to Redis, a local miss reads it,
// invalidations are broadcast to every instance, and the local tier is filled from Redis at start.
// Redis trouble never fails a request: the local tier answers alone.
//
// Metrics (cache_metrics.h) count hits per tier and task type, misses, guard rejections,
// evictions, invalidations, entries and bytes per bucket.
//
// Thread-safety: every method may be called from any thread; the store is guarded by one mutex,
// and embeddings (the slow part) are computed outside it.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "cache/cache_entry.h"
#include "cache/cache_key.h"
#include "cache/cache_metrics.h"
#include "cache/redis_tier.h"
#include "cache/semantic_index.h"
#include "core/asio.h"
#include "core/cache_config.h"
#include "core/embedder.h"

namespace hengshi::cache {

// The two text forms of a question the cache needs, from the edge's normaliser (injected, so the
// cache does not depend on the edge engines).
struct TextForms {
  // NFKC + case folding + whitespace: what the guards and the embedder read.
  std::function<std::string(std::string_view)> normalize;
  // The canonical form of the exact key: also width and punctuation folded.
  std::function<std::string(std::string_view)> canonical;
};

enum class CacheTier { exact, semantic, stale };
const char* to_string(CacheTier tier);

// One request's view of the cache, prepared once (cheap; the embedding is computed on demand).
struct CacheQuery {
  std::uint64_t scope = 0;
  std::uint64_t key = 0;
  std::string question;   // normalised
  std::string task_type;
  double threshold = 1.0;
  double verify_band = 0.0;  // borderline hits in [threshold - band, threshold) need a check
  bool semantic = true;
  std::int64_t ttl_s = 0;
  std::vector<std::string> tags;
  // The edge intent model's label of the question, __oos__ included ("" = no intent model).
  // With one, a semantic hit needs the cached question to carry the same label (the intent
  // guard): questions one intent apart often share most of their words (banking77: "card not
  // arrived" / "card delivery time"); bench/e2e measured 11-19% wrong semantic hits without it.
  // A question the model calls out of scope never gets an answer cached for an in-scope one.
  std::string intent;
  std::optional<std::vector<float>> vector;  // filled by lookup() or fill() when first needed
};

struct CacheHit {
  CacheTier tier = CacheTier::exact;
  std::shared_ptr<const CacheEntry> entry;
  float similarity = 1.0f;
  bool from_shared_tier = false;  // read from Redis on a local miss
  // Under the threshold but within cache.verify_band: served only if a cloud check agrees.
  bool borderline = false;
};

class AnswerCache {
 public:
  // `embedder` null = exact tier only. `redis` null = this instance alone.
  AnswerCache(const CacheConfig& config, std::shared_ptr<const Embedder> embedder, TextForms forms,
              std::unique_ptr<RedisTier> redis = nullptr, obs::Registry& registry = obs::Registry::global());
  ~AnswerCache();
  AnswerCache(const AnswerCache&) = delete;
  AnswerCache& operator=(const AnswerCache&) = delete;

  const CacheConfig& config() const { return config_; }
  // The clock entries are stamped and expired with (ms since the epoch; tests move it by hand).
  void use_clock(std::function<std::int64_t()> clock) { clock_ = std::move(clock); }
  const Embedder* embedder() const { return embedder_.get(); }
  // The shared tier (its Redis client also holds the fleet's key limits); null = none.
  RedisTier* redis() { return redis_.get(); }

  // The query for `request` in `scope`: its key, normalised question, threshold, TTL and tags
  // (the request's hengshi.tags and "intent:<intent>" when the edge labelled it, __oos__ included).
  CacheQuery query(const ChatRequest& request, const ScopeParts& scope, const std::string& intent) const;

  // A fresh hit: exact first, then the shared tier on a local miss, then the semantic tier.
  // Counts a hit or a miss. Never throws.
  awaitable<std::optional<CacheHit>> lookup(CacheQuery& query);
  // An entry for the exact question that expired less than stale_if_error_s ago (the last resort).
  std::optional<CacheHit> stale(const CacheQuery& query);
  // Stores `answer` as the answer to `query` (replacing one for the same key); written through
  // to the shared tier. Never throws.
  void fill(CacheQuery& query, CachedAnswer answer);

  // Removes every entry carrying any of `tags`, here, in Redis and (broadcast) on every other
  // instance; returns how many this instance and Redis held.
  std::size_t invalidate(const std::vector<std::string>& tags);
  std::size_t invalidate_all();

  // Entries, bytes, hits, ... for GET /admin/cache/stats.
  nlohmann::json stats();
  // Whether the shared tier is configured and answering (for /readyz).
  std::optional<bool> shared_tier_up() const;

  // The verdict on a borderline hit (metrics): yes | no | error.
  void verified(std::string_view verdict) { metrics_.verified(verdict); }
  // A request the cache did not consider, and why (metrics).
  void skipped(std::string_view reason) { metrics_.skipped(reason); }

  // Runs the Redis subscriber and the start-up load (call once, after construction).
  void start();

  // For tests: entries per bucket.
  std::size_t hot_entries();
  std::size_t cold_entries();

  // Local store operations, also used by the shared tier when entries arrive from Redis. The
  // entry's vector moves into the index (one copy of it is kept).
  void insert_local(std::shared_ptr<CacheEntry> entry);
  std::size_t invalidate_local(const std::vector<std::string>& tags);
  std::size_t invalidate_local_all();

 private:
  enum class Bucket { hot, cold };
  struct Slot {
    std::shared_ptr<const CacheEntry> entry;
    Bucket bucket = Bucket::hot;
    std::list<std::uint64_t>::iterator hot_position;
    std::size_t cold_position = 0;
    std::uint32_t hits = 0;
    std::int64_t last_use_ms = 0;
    std::size_t bytes = 0;
  };

  std::optional<CacheHit> exact_locked(const CacheQuery& query, std::int64_t now_ms);
  std::optional<CacheHit> semantic_locked(const CacheQuery& query, std::int64_t now_ms);
  void insert_locked(std::shared_ptr<CacheEntry> entry, std::int64_t now_ms);
  void remove_locked(std::uint64_t id);
  void touch_locked(Slot& slot, std::uint64_t id, std::int64_t now_ms);
  void to_cold_locked(std::uint64_t id, Slot& slot);
  void enforce_bounds_locked(std::int64_t now_ms);
  void evict_coldest_locked(std::int64_t now_ms);
  void sweep_locked(std::int64_t now_ms);
  void update_gauges_locked();
  std::optional<std::vector<float>> embed(const std::string& question) const;
  // embed() for a coroutine: inline for a cheap embedder, on embed_thread_ for an expensive one.
  awaitable<std::optional<std::vector<float>>> embed_awaited(std::string question);
  std::shared_ptr<CacheEntry> make_entry(CacheQuery& query, CachedAnswer answer);

  const CacheConfig config_;
  std::function<std::int64_t()> clock_;
  std::shared_ptr<const Embedder> embedder_;
  TextForms forms_;
  std::unique_ptr<RedisTier> redis_;
  CacheMetrics metrics_;
  asio::thread_pool embed_thread_{1};  // expensive embedders run here, never on an I/O thread

  std::mutex mutex_;
  std::unordered_map<std::uint64_t, Slot> slots_;
  std::unordered_map<std::uint64_t, std::uint64_t> by_key_;  // exact key → id
  std::unordered_map<std::string, std::unordered_set<std::uint64_t>> by_tag_;
  std::list<std::uint64_t> hot_;     // most recently used first
  std::vector<std::uint64_t> cold_;  // unordered; sampled for eviction
  std::size_t hot_bytes_ = 0;
  std::size_t cold_bytes_ = 0;
  std::unordered_map<std::uint64_t, std::unique_ptr<SemanticIndex>> indexes_;  // per scope
  std::mt19937_64 random_;
  std::int64_t last_sweep_ms_ = 0;
  std::uint64_t hits_ = 0;
  std::uint64_t misses_ = 0;
  std::uint64_t evictions_ = 0;
};

// Milliseconds since the epoch on the system clock (entries are shared across instances).
std::int64_t now_ms();

}  // namespace hengshi::cache
