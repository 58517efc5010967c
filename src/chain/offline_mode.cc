#include "chain/offline_mode.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

namespace hengshi::chain {

namespace {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

CloudReach classify_cloud_failure(cloud::UpstreamErrorKind kind) {
  using Kind = cloud::UpstreamErrorKind;
  switch (kind) {
    case Kind::connect_failed:
    case Kind::connect_timeout:
    case Kind::ttft_timeout:
    case Kind::total_timeout:
      return CloudReach::unreachable;
    case Kind::rate_limited:
    case Kind::server_error:
    case Kind::client_error:
    case Kind::auth_failed:
    case Kind::bad_response:
      return CloudReach::reached;
    default:
      // cancelled, overloaded, closed_early, a breaker's refusal and kinds added later: the
      // gateway (or the client) ended the call, so it says nothing about the cloud.
      return CloudReach::unknown;
  }
}

OfflineMode::Metrics OfflineMode::register_metrics(obs::Registry& registry) {
  const char* offline_help = "Offline-mode transitions (cloud unreachable / reachable again).";
  const char* edge_help = "Edge availability transitions.";
  Metrics m{};
  m.offline = &registry.gauge("hengshi_offline", "1 while the gateway is in offline mode.");
  m.to_offline =
      &registry.counter("hengshi_offline_transitions_total", offline_help, {{"to", "offline"}});
  m.to_online =
      &registry.counter("hengshi_offline_transitions_total", offline_help, {{"to", "online"}});
  m.edge_available =
      &registry.gauge("hengshi_edge_available", "1 while the edge can answer requests.");
  m.to_available =
      &registry.counter("hengshi_edge_transitions_total", edge_help, {{"to", "available"}});
  m.to_unavailable =
      &registry.counter("hengshi_edge_transitions_total", edge_help, {{"to", "unavailable"}});
  return m;
}

OfflineMode::OfflineMode(OfflineConfig config, int edge_error_threshold, obs::Registry& registry,
                         std::int64_t edge_retry_ms)
    : config_(std::move(config)),
      edge_error_threshold_(std::max(1, edge_error_threshold)),
      edge_retry_ms_(std::max<std::int64_t>(0, edge_retry_ms)),
      metrics_(register_metrics(registry)) {
  since_ms_ = edge_since_ms_ = unix_ms_now();
  metrics_.offline->set(0);
  metrics_.edge_available->set(1);
}

void OfflineMode::record_cloud_outcome(std::optional<cloud::UpstreamErrorKind> error) {
  CloudReach reach = error ? classify_cloud_failure(*error) : CloudReach::reached;
  if (reach == CloudReach::unknown) return;
  // The common case, a success while online with nothing counted, takes no lock.
  if (reach == CloudReach::reached && !offline() && consecutive_cloud_failures() == 0) return;

  std::string line;
  {
    std::lock_guard lock(mutex_);
    if (reach == CloudReach::reached) {
      consecutive_failures_.store(0, std::memory_order_relaxed);
      // An HTTP error proves the cloud is reachable but not that it answers: only a success
      // ends offline mode.
      if (!error && offline()) line = go_online_locked("a cloud call succeeded");
    } else {
      int failures = consecutive_failures_.load(std::memory_order_relaxed) + 1;
      consecutive_failures_.store(failures, std::memory_order_relaxed);
      int threshold = std::max(1, config_.consecutive_failures);
      if (config_.enabled && !offline() && failures >= threshold) {
        line = go_offline_locked(std::to_string(failures) + " cloud calls in a row failed (last: " +
                                 cloud::to_string(*error) + ")");
      }
    }
  }
  if (!line.empty()) spdlog::warn("{}", line);
}

void OfflineMode::record_probe(bool answered, std::string_view member) {
  if (!answered) return;
  std::string line;
  {
    std::lock_guard lock(mutex_);
    consecutive_failures_.store(0, std::memory_order_relaxed);
    if (offline()) {
      line = go_online_locked("the cloud probe to member '" + std::string(member) + "' answered");
    }
  }
  if (!line.empty()) spdlog::warn("{}", line);
}

std::string OfflineMode::go_offline_locked(std::string why) {
  offline_.store(true, std::memory_order_release);
  since_ms_ = unix_ms_now();
  metrics_.offline->set(1);
  metrics_.to_offline->inc();
  return "offline mode ON: " + why + "; answering from the edge only until the cloud answers";
}

std::string OfflineMode::go_online_locked(std::string why) {
  offline_.store(false, std::memory_order_release);
  since_ms_ = unix_ms_now();
  metrics_.offline->set(0);
  metrics_.to_online->inc();
  return "offline mode OFF: " + why;
}

std::string OfflineMode::set_edge_locked(bool available, std::string reason) {
  edge_errors_.store(0, std::memory_order_relaxed);
  if (edge_available() == available) return {};
  edge_available_.store(available, std::memory_order_release);
  edge_since_ms_ = unix_ms_now();
  edge_reason_ = reason;
  metrics_.edge_available->set(available ? 1 : 0);
  (available ? metrics_.to_available : metrics_.to_unavailable)->inc();
  return available ? "edge available again: " + reason
                   : "edge UNAVAILABLE: " + reason + "; sending requests to the cloud";
}

bool OfflineMode::edge_worth_trying() const {
  return edge_available() || unix_ms_now() >= edge_retry_at_ms_.load(std::memory_order_relaxed);
}

void OfflineMode::set_edge_available(bool available, std::string reason) {
  std::string line;
  {
    std::lock_guard lock(mutex_);
    edge_retry_at_ms_.store(std::numeric_limits<std::int64_t>::max(), std::memory_order_relaxed);
    line = set_edge_locked(available, std::move(reason));
  }
  if (!line.empty()) spdlog::warn("{}", line);
}

void OfflineMode::record_edge_error(std::string_view reason) {
  std::string line;
  {
    std::lock_guard lock(mutex_);
    int errors = edge_errors_.load(std::memory_order_relaxed) + 1;
    edge_errors_.store(errors, std::memory_order_relaxed);
    if (errors >= edge_error_threshold_) {
      edge_retry_at_ms_.store(unix_ms_now() + edge_retry_ms_, std::memory_order_relaxed);
    }
    if (errors >= edge_error_threshold_ && edge_available()) {
      line = set_edge_locked(false, std::to_string(errors) + " edge errors in a row (last: " +
                                        std::string(reason) + ")");
    }
  }
  if (!line.empty()) spdlog::warn("{}", line);
}

void OfflineMode::record_edge_success() {
  // The common case, the edge answering while available with no errors counted, takes no lock.
  if (edge_available() && edge_errors_.load(std::memory_order_relaxed) == 0) return;
  std::string line;
  {
    std::lock_guard lock(mutex_);
    line = set_edge_locked(true, "an edge call succeeded");
  }
  if (!line.empty()) spdlog::warn("{}", line);
}

nlohmann::json OfflineMode::to_json() const {
  std::lock_guard lock(mutex_);
  return {
      {"enabled", config_.enabled},
      {"offline", offline()},
      {"since_ms", since_ms_},
      {"consecutive_cloud_failures", consecutive_cloud_failures()},
      {"edge_available", edge_available()},
      {"edge_since_ms", edge_since_ms_},
      {"edge_reason", edge_reason_},
  };
}

}  // namespace hengshi::chain
