// CacheConfig: the answer cache's settings (src/cache/, DESIGN-NOTES "Cache"). Part of Config;
// every field has a default, so `cache: {}` (or nothing) is an exact + semantic cache in memory.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace hengshi {

// Per task type, over the cache's own settings.
struct CacheTaskConfig {
  std::optional<bool> enabled;
  std::optional<std::int64_t> ttl_s;
  std::optional<double> threshold;  // the semantic tier's cosine for this task type
};

// One bucket of entries: bounded in count and in bytes (whichever is reached first evicts).
struct CacheBucketConfig {
  std::int64_t max_entries = 0;
  std::int64_t max_bytes = 0;
};

// The shared tier (src/cache/redis_tier.h): entries, invalidations and client-key limits across
// a fleet. host "" = no Redis (everything stays in this instance).
struct CacheRedisConfig {
  std::string host;
  int port = 6379;
  std::string password_env;        // environment variable holding the password; "" = none
  std::string prefix = "hengshi:";  // every key the gateway writes starts with this
  std::int64_t timeout_ms = 50;    // bound on every call; a slower Redis counts as down
  // Instances sharing the key limits: while Redis is down each one enforces 1/fleet_size of a
  // key's rpm / tpm / budget by itself.
  int fleet_size = 1;
  std::int64_t retry_ms = 1000;    // how often a down Redis is tried again
};

struct CacheConfig {
  bool enabled = true;
  bool semantic = true;                  // false: exact matches only
  std::string embedder = "ngram";        // ngram | fasttext (the intent model's) | llama
  std::string embedding_model;           // llama: a GGUF embedding model (bge, e5, ...)
  int ngram_dim = 256;  // bench/cache: as good as 1024 on ATEC, a quarter of the memory and search
  // Cosine a semantic hit needs (per task type in task_types). Chosen by bench/cache for the
  // default embedder on ATEC pairs (whose different-meaning pairs look alike): 0.7 keeps false
  // hits at 0.08% with the guards, a wide margin under 1% for traffic whose near-misses look
  // even more alike; the lowest threshold that keeps 1% there is about 0.56.
  double threshold = 0.7;
  // The semantic tier considers only questions up to this many characters (code points). A
  // long prompt — a document, a multiple-choice question with its options — shares its template
  // with its neighbours, so a surface similarity there measures the template, not the meaning:
  // bench/e2e saw the n-gram tier answer a third of its MMLU questions with another's answer.
  // Longer questions still hit the exact tier. 0 = no limit.
  std::int64_t semantic_max_chars = 160;
  // Borderline hits in [threshold - verify_band, threshold) are served only after a one-token
  // yes/no check on cloud-small (0 = off).
  double verify_band = 0.0;
  std::int64_t ttl_s = 3600;
  // An expired entry for the same question still answers at L4 (instead of the canned reply)
  // this long after it expired; 0 = never.
  std::int64_t stale_if_error_s = 86'400;
  std::map<std::string, CacheTaskConfig> task_types;
  // Hot: the recent entries (LRU, at most hot_window_s old); cold: the rest, evicted coldest first.
  CacheBucketConfig hot{10'000, 32 << 20};
  std::int64_t hot_window_s = 3600;
  CacheBucketConfig cold{200'000, std::int64_t{256} << 20};
  // The ANN index is rebuilt once deleted entries exceed this share of it.
  double rebuild_tombstone_share = 0.25;
  CacheRedisConfig redis;

  bool enabled_for(const std::string& task_type) const {
    auto it = task_types.find(task_type);
    return enabled && (it == task_types.end() || it->second.enabled.value_or(true));
  }
  std::int64_t ttl_for(const std::string& task_type) const {
    auto it = task_types.find(task_type);
    return it == task_types.end() ? ttl_s : it->second.ttl_s.value_or(ttl_s);
  }
  double threshold_for(const std::string& task_type) const {
    auto it = task_types.find(task_type);
    return it == task_types.end() ? threshold : it->second.threshold.value_or(threshold);
  }
};

}  // namespace hengshi
