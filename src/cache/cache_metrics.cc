#include "cache/cache_metrics.h"

namespace hengshi::cache {
namespace {
constexpr std::size_t kMaxTaskTypeLabels = 64;
}  // namespace

CacheMetrics::CacheMetrics(obs::Registry& registry) : registry_(registry) {
  const char* entries_help = "Entries in the answer cache, by bucket.";
  const char* bytes_help = "Bytes the answer cache holds, by bucket (entries and their index).";
  hot_entries_ = &registry_.gauge("hengshi_cache_entries", entries_help, {{"bucket", "hot"}});
  cold_entries_ = &registry_.gauge("hengshi_cache_entries", entries_help, {{"bucket", "cold"}});
  hot_bytes_ = &registry_.gauge("hengshi_cache_bytes", bytes_help, {{"bucket", "hot"}});
  cold_bytes_ = &registry_.gauge("hengshi_cache_bytes", bytes_help, {{"bucket", "cold"}});
  redis_up_ = &registry_.gauge("hengshi_cache_redis_up", "1 while the shared cache tier (Redis) answers.", {});
}

std::string CacheMetrics::task_label(const std::string& task_type) {
  const std::string name = task_type.empty() ? "default" : task_type;
  // Caller words: bounded. Called with mutex_ held.
  if (task_types_.count(name) != 0) return name;
  if (task_types_.size() >= kMaxTaskTypeLabels) return "other";
  task_types_[name] = true;
  return name;
}

obs::Counter& CacheMetrics::counter(const char* name, const char* help, obs::Labels labels) {
  std::string key = name;
  for (const auto& [label, value] : labels) key += '\x1f' + value;
  auto it = counters_.find(key);
  if (it != counters_.end()) return *it->second;
  obs::Counter& created = registry_.counter(name, help, labels);
  counters_.emplace(std::move(key), &created);
  return created;
}

void CacheMetrics::hit(std::string_view tier, const std::string& task_type) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_hits_total", "Requests answered from the cache, by tier and task type.",
          {{"tier", std::string(tier)}, {"task_type", task_label(task_type)}})
      .inc();
}

void CacheMetrics::miss(const std::string& task_type) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_misses_total", "Cache lookups that found nothing to serve, by task type.",
          {{"task_type", task_label(task_type)}})
      .inc();
}

void CacheMetrics::skipped(std::string_view reason) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_skipped_total", "Requests the cache did not consider, by reason.",
          {{"reason", std::string(reason)}})
      .inc();
}

void CacheMetrics::filled(const std::string& task_type) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_fills_total", "Answers stored in the cache, by task type.",
          {{"task_type", task_label(task_type)}})
      .inc();
}

void CacheMetrics::guard_rejected(std::string_view guard) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_guard_rejections_total",
          "Semantic candidates above the threshold refused by a hit guard, by guard.", {{"guard", std::string(guard)}})
      .inc();
}

void CacheMetrics::verified(std::string_view verdict) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_verifications_total",
          "Borderline semantic hits (cache.verify_band) checked by cloud-small, by verdict.",
          {{"verdict", std::string(verdict)}})
      .inc();
}

void CacheMetrics::evicted(std::string_view bucket) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_evictions_total",
          "Entries pushed out by the memory bounds: hot = moved to cold, cold = removed.",
          {{"bucket", std::string(bucket)}})
      .inc();
}

void CacheMetrics::invalidated(std::size_t entries) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_invalidated_entries_total", "Entries removed by tag invalidation.", {})
      .inc(static_cast<double>(entries));
}

void CacheMetrics::set_sizes(std::size_t hot_entries, std::size_t hot_bytes, std::size_t cold_entries,
                             std::size_t cold_bytes) {
  hot_entries_->set(static_cast<double>(hot_entries));
  hot_bytes_->set(static_cast<double>(hot_bytes));
  cold_entries_->set(static_cast<double>(cold_entries));
  cold_bytes_->set(static_cast<double>(cold_bytes));
}

void CacheMetrics::redis_error(std::string_view op) {
  std::lock_guard lock(mutex_);
  counter("hengshi_cache_redis_errors_total", "Calls to the shared cache tier that failed or timed out, by operation.",
          {{"op", std::string(op)}})
      .inc();
}

void CacheMetrics::redis_up(bool up) { redis_up_->set(up ? 1.0 : 0.0); }

}  // namespace hengshi::cache
