// Reading and checking the `cache:` section (core/cache_config.h); called by config.cc.
#include "core/cache_config_yaml.h"

#include "core/yaml_fields.h"

namespace hengshi {
namespace {

using yaml_fields::FieldError;
using yaml_fields::positive;
using yaml_fields::read;
using yaml_fields::reject_unknown;

void parse_bucket(const YAML::Node& node, const std::string& path, CacheBucketConfig& bucket) {
  reject_unknown(node, path, {"max_entries", "max_bytes"});
  read(node, path, "max_entries", bucket.max_entries);
  read(node, path, "max_bytes", bucket.max_bytes);
}

void check_share(double value, const std::string& field) {
  if (!(value >= 0.0 && value <= 1.0)) throw FieldError{field, "must be in [0, 1]"};
}

}  // namespace

void parse_cache(const YAML::Node& node, CacheConfig& c) {
  const std::string path = "cache";
  reject_unknown(node, path,
                 {"enabled", "semantic", "embedder", "embedding_model", "ngram_dim", "threshold", "verify_band",
                  "semantic_max_chars", "ttl_s", "stale_if_error_s", "task_types", "hot", "hot_window_s", "cold",
                  "rebuild_tombstone_share", "redis"});
  read(node, path, "enabled", c.enabled);
  read(node, path, "semantic", c.semantic);
  read(node, path, "embedder", c.embedder);
  read(node, path, "embedding_model", c.embedding_model);
  read(node, path, "ngram_dim", c.ngram_dim);
  read(node, path, "threshold", c.threshold);
  read(node, path, "verify_band", c.verify_band);
  read(node, path, "semantic_max_chars", c.semantic_max_chars);
  read(node, path, "ttl_s", c.ttl_s);
  read(node, path, "stale_if_error_s", c.stale_if_error_s);
  read(node, path, "hot_window_s", c.hot_window_s);
  read(node, path, "rebuild_tombstone_share", c.rebuild_tombstone_share);
  if (const YAML::Node tasks = node["task_types"]) {
    if (!tasks.IsMap()) throw FieldError{"cache.task_types", "must be a mapping of task type → settings"};
    for (const auto& item : tasks) {
      const auto name = item.first.as<std::string>();
      const std::string task_path = "cache.task_types." + name;
      reject_unknown(item.second, task_path, {"enabled", "ttl_s", "threshold"});
      CacheTaskConfig task;
      if (item.second["enabled"]) {
        bool enabled = true;
        read(item.second, task_path, "enabled", enabled);
        task.enabled = enabled;
      }
      if (item.second["ttl_s"]) {
        std::int64_t ttl = 0;
        read(item.second, task_path, "ttl_s", ttl);
        task.ttl_s = ttl;
      }
      if (item.second["threshold"]) {
        double threshold = 0;
        read(item.second, task_path, "threshold", threshold);
        task.threshold = threshold;
      }
      c.task_types[name] = task;
    }
  }
  if (const YAML::Node hot = node["hot"]) parse_bucket(hot, "cache.hot", c.hot);
  if (const YAML::Node cold = node["cold"]) parse_bucket(cold, "cache.cold", c.cold);
  if (const YAML::Node redis = node["redis"]) {
    const std::string redis_path = "cache.redis";
    reject_unknown(redis, redis_path, {"host", "port", "password_env", "prefix", "timeout_ms", "fleet_size", "retry_ms"});
    read(redis, redis_path, "host", c.redis.host);
    read(redis, redis_path, "port", c.redis.port);
    read(redis, redis_path, "password_env", c.redis.password_env);
    read(redis, redis_path, "prefix", c.redis.prefix);
    read(redis, redis_path, "timeout_ms", c.redis.timeout_ms);
    read(redis, redis_path, "fleet_size", c.redis.fleet_size);
    read(redis, redis_path, "retry_ms", c.redis.retry_ms);
  }
}

void check_cache(const CacheConfig& c) {
  if (c.embedder != "ngram" && c.embedder != "fasttext" && c.embedder != "llama") {
    throw FieldError{"cache.embedder", "must be ngram, fasttext or llama (got '" + c.embedder + "')"};
  }
  if (c.embedder == "llama" && c.embedding_model.empty()) {
    throw FieldError{"cache.embedding_model", "is required with embedder llama (a GGUF embedding model)"};
  }
  if (c.ngram_dim < 16 || c.ngram_dim > 65536) throw FieldError{"cache.ngram_dim", "must be in [16, 65536]"};
  auto check_threshold = [](double value, const std::string& field) {
    if (!(value > 0.0 && value <= 1.0)) throw FieldError{field, "must be a cosine in (0, 1]"};
  };
  check_threshold(c.threshold, "cache.threshold");
  if (c.semantic_max_chars < 0) throw FieldError{"cache.semantic_max_chars", "must be >= 0 (0 = no limit)"};
  check_share(c.verify_band, "cache.verify_band");
  positive(c.ttl_s, "cache.ttl_s");
  if (c.stale_if_error_s < 0) throw FieldError{"cache.stale_if_error_s", "must be >= 0 (0 = never)"};
  positive(c.hot_window_s, "cache.hot_window_s");
  for (const auto& [name, bucket] : {std::pair<const char*, CacheBucketConfig>{"hot", c.hot}, {"cold", c.cold}}) {
    positive(bucket.max_entries, std::string("cache.") + name + ".max_entries");
    positive(bucket.max_bytes, std::string("cache.") + name + ".max_bytes");
  }
  if (!(c.rebuild_tombstone_share > 0.0 && c.rebuild_tombstone_share <= 1.0)) {
    throw FieldError{"cache.rebuild_tombstone_share", "must be in (0, 1]"};
  }
  for (const auto& [name, task] : c.task_types) {
    if (task.ttl_s) positive(*task.ttl_s, "cache.task_types." + name + ".ttl_s");
    if (task.threshold) check_threshold(*task.threshold, "cache.task_types." + name + ".threshold");
  }
  if (!c.redis.host.empty()) {
    if (c.redis.port <= 0 || c.redis.port > 65535) throw FieldError{"cache.redis.port", "must be in [1, 65535]"};
    positive(c.redis.timeout_ms, "cache.redis.timeout_ms");
    positive(c.redis.fleet_size, "cache.redis.fleet_size");
    positive(c.redis.retry_ms, "cache.redis.retry_ms");
    if (c.redis.prefix.empty()) throw FieldError{"cache.redis.prefix", "must not be empty"};
  }
}

}  // namespace hengshi
