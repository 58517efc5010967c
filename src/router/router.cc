#include "router/router.h"

#include <spdlog/spdlog.h>

#include "router/router_metrics.h"

namespace hengshi::router {

Result<std::unique_ptr<Router>> Router::create(const Config& config) {
  auto policy = load_router_policy(config.routing.policy_file, config.routing.thresholds_file);
  if (!policy) return policy.error();
  RouterMetrics::set_policy_version((*policy)->version);
  return std::unique_ptr<Router>(
      new Router(std::move(*policy), config.routing.policy_file, config.routing.thresholds_file));
}

Router::Router(std::shared_ptr<const RouterPolicy> policy, std::string policy_file, std::string thresholds_file)
    : runtime_(std::make_unique<RouterRuntime>(*policy)),
      policy_file_(std::move(policy_file)),
      thresholds_file_(std::move(thresholds_file)) {
  policy_.store(std::move(policy));
  loaded_stamp_ = stamp();
}

Decision Router::decide(const RouteInput& input, const RouterPolicy& policy,
                        std::chrono::steady_clock::time_point now) {
  Decision decision = router::decide(input, policy, *runtime_, now);
  RouterMetrics::count(decision, input);
  return decision;
}

std::filesystem::file_time_type Router::stamp() const {
  // The later of the two files' times: either changing triggers a reload. Starts at min(), not
  // {}: libstdc++'s file_clock epoch is in 2174, so every real mtime is below file_time_type{}.
  std::filesystem::file_time_type latest = std::filesystem::file_time_type::min();
  for (const std::string* path : {&policy_file_, &thresholds_file_}) {
    if (path->empty()) continue;
    std::error_code error;
    auto time = std::filesystem::last_write_time(*path, error);
    if (!error && time > latest) latest = time;
  }
  return latest;
}

Result<std::string> Router::reload(const std::string& trigger) {
  std::lock_guard lock(reload_mutex_);
  const auto seen = stamp();
  auto policy = load_router_policy(policy_file_, thresholds_file_);
  loaded_stamp_ = seen;  // a bad file is reported once per change, not on every watch tick
  if (!policy) {
    RouterMetrics::count_reload("rejected");
    spdlog::error("policy reload ({}) rejected, keeping {}: {}", trigger, policy_.load()->version,
                  policy.error().message);
    return policy.error();
  }
  std::string version = (*policy)->version;
  policy_.store(std::move(*policy));
  RouterMetrics::count_reload("applied");
  RouterMetrics::set_policy_version(version);
  spdlog::info("policy reload ({}): now {}", trigger, version);
  return version;
}

void Router::reload_if_changed() {
  if (policy_file_.empty() && thresholds_file_.empty()) return;
  {
    // loaded_stamp_ is written by reload() under the mutex (an admin reload may run right now).
    std::lock_guard lock(reload_mutex_);
    if (stamp() == loaded_stamp_) return;
  }
  (void)reload("file change");
}

}  // namespace hengshi::router
