// ChainConfig: the settings of the degradation chain (src/chain/, DESIGN-NOTES "The chain"):
// level budget shares, retries, circuit breakers, bulkheads, the stream commit point, offline
// mode, shadow inference and the last resort. Part of Config; every field has a default.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace hengshi {

// Each level's timeout is its share of the budget *remaining* when the level starts; the last
// resort (L4) gets a fixed time. The last level of a plan before L4 gets all that is left.
struct LevelShares {
  double edge = 0.7;           // L0 edge native
  double edge_degraded = 0.3;  // L1 edge degraded (context 70%, few-shot off, output halved)
  double cloud_small = 0.5;    // L2
  double cloud_large = 0.8;    // L3
  std::int64_t last_resort_ms = 50;  // L4 canned reply / human hand-off
};

struct RetryConfig {
  bool enabled = true;
  // Full jitter: attempt k+1 waits uniform(0, backoff_ms[k]); the list's length bounds the
  // retries per level. Never past the level's budget; an upstream Retry-After is a floor.
  std::vector<std::int64_t> backoff_ms = {200, 500, 1000};
};

// A member's circuit breaker (cloud/circuit_breaker.h) and its pool's panic rule
// (cloud/cloud_pool.h). The defaults follow Envoy's outlier detection: a member is taken out on
// a run of failures, or on a failure share that is both high and clearly worse than its pool's
// other members'; a pool whose members mostly look bad ignores the breakers (panic).
struct BreakerConfig {
  bool enabled = true;
  int consecutive_failures = 5;         // counted failures in a row → open
  int consecutive_outage_failures = 3;  // connect failures / timeouts in a row → open (0 = off)
  double failure_ratio = 0.5;           // or >= this share of failed calls ...
  int min_calls = 20;                   // ... among at least this many in the window ...
  double outlier_margin = 0.2;          // ... and >= the other members' share + this (when known)
  std::int64_t window_ms = 30'000;      // sliding window of outcomes
  std::int64_t open_ms = 5'000;         // the first opening's cool-down; ×2 per opening in a row
  std::int64_t max_open_ms = 60'000;    // cap of the growing cool-down
  double panic_threshold = 0.5;  // under this share of members allowing calls, pick among all
};

// Bulkheads: bounded concurrency per cloud pool with a bounded queue; a full queue fails fast
// with 429 + Retry-After. (The edge LLM's bulkhead is edge.llm.workers / max_queue.)
struct BulkheadConfig {
  int max_concurrent = 256;
  int max_queue = 256;
  std::int64_t max_queue_wait_ms = 2'000;  // capped by the level's budget
};

// Before the commit point a stream's pieces are held back and a failing attempt is replaced
// invisibly; after it the stream finishes from the same source or ends with an error event.
// When the pieces are held (mode): always; never (the first piece commits); or adaptive — only
// while the answering member looks flaky (a stream of it broke midway within the breaker's
// window, or it has not finished one yet) and something later in the walk could replace it.
enum class CommitMode { adaptive, always, never };
const char* to_string(CommitMode mode);
std::optional<CommitMode> commit_mode_from_string(std::string_view name);

struct CommitConfig {
  int tokens = 16;             // content pieces held before committing
  bool first_sentence = true;  // or commit at the end of the first sentence, whichever is first
  CommitMode mode = CommitMode::adaptive;
  std::map<std::string, CommitMode> task_modes;  // per task type, over `mode`

  CommitMode mode_for(const std::string& task_type) const {
    auto it = task_modes.find(task_type);
    return it == task_modes.end() ? mode : it->second;
  }
};

struct OfflineConfig {
  bool enabled = true;
  int consecutive_failures = 3;      // cloud connect failures / timeouts in a row → offline
  double edge_threshold = 0.5;       // the intent engine answers at >= this while offline
  std::string notice = "（当前处于离线模式，部分内容可能不够准确）";  // appended to offline answers
  std::int64_t probe_interval_ms = 2'000;  // background probe of the cloud while offline
};

struct ShadowConfig {
  double sample_rate = 0.0;              // share of middle-band requests shadowed (0 = off)
  std::vector<std::string> task_types;   // also shadow these task types at sample_rate
  std::int64_t timeout_ms = 10'000;      // a shadow call's own budget
};

struct LastResortConfig {
  std::string kind = "canned";  // canned | human | error (no L4: the last error goes back)
  std::string message = "抱歉，服务暂时繁忙，请稍后再试。";
};

struct ChainConfig {
  LevelShares shares;
  std::map<std::string, LevelShares> task_shares;  // per task type, over `shares`
  RetryConfig retry;
  BreakerConfig breaker;
  std::map<std::string, BulkheadConfig> bulkheads;  // per pool name; missing = defaults
  CommitConfig commit;
  OfflineConfig offline;
  ShadowConfig shadow;
  LastResortConfig last_resort;

  const LevelShares& shares_for(const std::string& task_type) const {
    auto it = task_shares.find(task_type);
    return it == task_shares.end() ? shares : it->second;
  }
  BulkheadConfig bulkhead_for(const std::string& pool) const {
    auto it = bulkheads.find(pool);
    return it == bulkheads.end() ? BulkheadConfig{} : it->second;
  }
};

}  // namespace hengshi
