// OfflineMode: the gateway's view of whether the cloud and the edge can be used (issue 9 §5).
//
// Offline: OfflineConfig::consecutive_failures cloud calls in a row that could not reach the
// cloud (connect_failed, connect_timeout, ttft_timeout, total_timeout) switch the gateway
// offline: the plan builder then makes every plan edge-only. A call that reached the cloud (a
// success, or an HTTP answer such as 429/5xx/4xx) resets the count; only a successful cloud call
// or a successful probe (cloud_probe.h) switches back online. Kinds that say nothing about the
// cloud's reachability (cancelled, overloaded, closed_early, a breaker refusing the call, any
// kind added later) neither count nor reset. With `enabled = false` the count is kept for
// /readyz but the gateway never goes offline.
//
// Edge availability: set_edge_available() (failed load, out of memory, ...) or
// edge_error_threshold edge errors in a row mark the edge unavailable, so plans go to the cloud
// instead; an edge success (or set_edge_available(true, ...)) marks it available again.
//
// Transitions are logged (warn) and counted; metrics, declared here in one place:
//   hengshi_offline                               gauge, 1 while offline
//   hengshi_offline_transitions_total{to}         counter, to = offline | online
//   hengshi_edge_available                        gauge, 1 while the edge is available
//   hengshi_edge_transitions_total{to}            counter, to = available | unavailable
//
// Thread-safety: every method may be called from any thread. offline() and edge_available() are
// single atomic loads (read on every request); recording takes a mutex only when something may
// change. Times in to_json() are Unix milliseconds.
#pragma once

#include <atomic>
#include <limits>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "cloud/upstream_error.h"
#include "core/chain_config.h"
#include "obs/metrics.h"

namespace hengshi::chain {

// Edge errors in a row that mark the edge unavailable (not in OfflineConfig).
inline constexpr int kEdgeErrorThreshold = 3;
// How often an edge taken out by errors is tried again.
inline constexpr std::int64_t kEdgeRetryMs = 10'000;

// What one failed cloud call says about the cloud's reachability.
enum class CloudReach {
  unreachable,  // counts toward offline
  reached,      // the cloud answered (an HTTP error): resets the count
  unknown,      // says nothing: neither counts nor resets
};
CloudReach classify_cloud_failure(cloud::UpstreamErrorKind kind);

class OfflineMode {
 public:
  // `registry` holds the metrics (a test passes its own).
  // `edge_retry_ms`: while edge errors keep the edge out, plans try it again this often, so real
  // traffic finds out when it recovered (a success restores it, an error waits again).
  explicit OfflineMode(OfflineConfig config, int edge_error_threshold = kEdgeErrorThreshold,
                       obs::Registry& registry = obs::Registry::global(),
                       std::int64_t edge_retry_ms = kEdgeRetryMs);
  OfflineMode(const OfflineMode&) = delete;
  OfflineMode& operator=(const OfflineMode&) = delete;

  const OfflineConfig& config() const { return config_; }

  bool offline() const { return offline_.load(std::memory_order_acquire); }
  // Whether a plan may use the edge now: while it is available, and — when errors took it out
  // (not a failed load) — once edge_retry_ms has passed since the last error.
  bool edge_worth_trying() const;
  bool edge_available() const { return edge_available_.load(std::memory_order_acquire); }
  int consecutive_cloud_failures() const {
    return consecutive_failures_.load(std::memory_order_relaxed);
  }

  // A finished cloud call: `error` is nullopt for a success, else the failure's kind.
  void record_cloud_outcome(std::optional<cloud::UpstreamErrorKind> error);
  // The background probe's answer; `member` names who answered (for the log). A failed probe
  // changes nothing.
  void record_probe(bool answered, std::string_view member = {});

  // An explicit edge state (model loaded / failed to load / out of memory). Resets the errors.
  void set_edge_available(bool available, std::string reason);
  // One edge call failed; edge_error_threshold in a row mark the edge unavailable.
  void record_edge_error(std::string_view reason);
  // One edge call succeeded: resets the errors and marks the edge available.
  void record_edge_success();

  // For /readyz detail: {"offline", "since_ms", "consecutive_cloud_failures", "edge_available",
  // "edge_since_ms", "edge_reason"}; since_ms is when the current offline/online state began.
  nlohmann::json to_json() const;

 private:
  struct Metrics {
    obs::Gauge* offline;
    obs::Counter* to_offline;
    obs::Counter* to_online;
    obs::Gauge* edge_available;
    obs::Counter* to_available;
    obs::Counter* to_unavailable;
  };
  static Metrics register_metrics(obs::Registry& registry);

  // Under mutex_: switch and count. Return the log line to write once the mutex is released.
  std::string go_offline_locked(std::string why);
  std::string go_online_locked(std::string why);
  std::string set_edge_locked(bool available, std::string reason);

  const OfflineConfig config_;
  const int edge_error_threshold_;
  const std::int64_t edge_retry_ms_;
  Metrics metrics_;
  // Unix ms from when an edge out for errors may be tried again; max = never (a failed load).
  std::atomic<std::int64_t> edge_retry_at_ms_{std::numeric_limits<std::int64_t>::max()};

  std::atomic<bool> offline_{false};
  std::atomic<bool> edge_available_{true};
  std::atomic<int> consecutive_failures_{0};  // written under mutex_
  std::atomic<int> edge_errors_{0};           // written under mutex_

  mutable std::mutex mutex_;
  std::int64_t since_ms_ = 0;       // Unix ms of the last offline/online change (or creation)
  std::int64_t edge_since_ms_ = 0;  // Unix ms of the last edge change (or creation)
  std::string edge_reason_;         // why the edge is in its current state ("" at start)
};

}  // namespace hengshi::chain
