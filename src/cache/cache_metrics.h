// The cache's metrics, declared in one place (STYLE.md):
//   hengshi_cache_hits_total{tier,task_type}          tier = exact | semantic | stale
//   hengshi_cache_misses_total{task_type}
//   hengshi_cache_skipped_total{reason}               requests the cache did not consider
//   hengshi_cache_fills_total{task_type}
//   hengshi_cache_guard_rejections_total{guard}       polarity | numbers
//   hengshi_cache_verifications_total{verdict}        borderline hits checked: yes | no | error
//   hengshi_cache_evictions_total{bucket}             hot (moved to cold) | cold (removed)
//   hengshi_cache_invalidated_entries_total           entries removed by invalidation
//   hengshi_cache_entries{bucket}, hengshi_cache_bytes{bucket}
//   hengshi_cache_redis_errors_total{op}, hengshi_cache_redis_up
// Task type labels are the caller's words: the first 64 distinct ones are kept, the rest count
// as "other", so a client cannot grow the series without bound.
//
// Thread-safety: every method may be called concurrently.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "obs/metrics.h"

namespace hengshi::cache {

class CacheMetrics {
 public:
  explicit CacheMetrics(obs::Registry& registry = obs::Registry::global());

  void hit(std::string_view tier, const std::string& task_type);
  void miss(const std::string& task_type);
  void skipped(std::string_view reason);
  void filled(const std::string& task_type);
  void guard_rejected(std::string_view guard);
  void verified(std::string_view verdict);
  void evicted(std::string_view bucket);
  void invalidated(std::size_t entries);
  void set_sizes(std::size_t hot_entries, std::size_t hot_bytes, std::size_t cold_entries, std::size_t cold_bytes);
  void redis_error(std::string_view op);
  void redis_up(bool up);

 private:
  std::string task_label(const std::string& task_type);
  obs::Counter& counter(const char* name, const char* help, obs::Labels labels);

  obs::Registry& registry_;
  std::mutex mutex_;
  std::unordered_map<std::string, obs::Counter*> counters_;  // by name + labels
  std::unordered_map<std::string, bool> task_types_;
  obs::Gauge* hot_entries_;
  obs::Gauge* hot_bytes_;
  obs::Gauge* cold_entries_;
  obs::Gauge* cold_bytes_;
  obs::Gauge* redis_up_;
};

}  // namespace hengshi::cache
