#include "router/router.h"

#include <spdlog/spdlog.h>

#include "core/run_on.h"
#include "router/router_metrics.h"

namespace hengshi::router {

Result<std::unique_ptr<Router>> Router::create(const Config& config) {
  auto policy = load_router_policy(config.routing.policy_file, config.routing.thresholds_file,
                                   config.routing.complexity_model);
  if (!policy) return policy.error();
  if (const auto& model = (*policy)->complexity_model) {
    spdlog::info("complexity model {} ({}): cut {:.4f} for {:.0f}% cloud-large", model->version(),
                 complexity_kind_name(model->kind()), model->cut(), 100 * model->large_share());
  }
  RouterMetrics::set_policy_version((*policy)->version);
  if (const std::string warning = pii_disabled_warning(**policy); !warning.empty()) {
    spdlog::warn("{}", warning);
  }
  return std::unique_ptr<Router>(new Router(std::move(*policy), config.routing.policy_file,
                                            config.routing.thresholds_file,
                                            config.routing.complexity_model));
}

Router::Router(std::shared_ptr<const RouterPolicy> policy, std::string policy_file,
               std::string thresholds_file, std::string complexity_model_dir)
    : runtime_(std::make_unique<RouterRuntime>(*policy)),
      policy_file_(std::move(policy_file)),
      thresholds_file_(std::move(thresholds_file)),
      complexity_model_dir_(std::move(complexity_model_dir)) {
  policy_.store(std::move(policy));
  watch_.loaded(stamp());
}

Decision Router::decide(const RouteInput& input, const RouterPolicy& policy,
                        std::chrono::steady_clock::time_point now) {
  Decision decision = router::decide(input, policy, *runtime_, now);
  RouterMetrics::count(decision, input);
  return decision;
}

Router::~Router() {
  // A reload in progress finishes (and posts its result) before the router goes.
  if (reload_thread_) reload_thread_->join();
}

FileStamp Router::stamp() const {
  return stamp_files({policy_file_, thresholds_file_,
                      complexity_model_dir_.empty() ? "" : complexity_model_dir_ + "/manifest.json"});
}

Result<std::string> Router::reload(const std::string& trigger) {
  std::lock_guard lock(reload_mutex_);
  const auto seen = stamp();
  auto policy = load_router_policy(policy_file_, thresholds_file_, complexity_model_dir_);
  watch_.loaded(seen);  // a bad file is reported once per change, not on every watch tick
  if (!policy) {
    RouterMetrics::count_reload("rejected");
    spdlog::error("policy reload ({}) rejected, keeping {}: {}", trigger, policy_.load()->version,
                  policy.error().message);
    return policy.error();
  }
  std::string version = (*policy)->version;
  if (const std::string warning = pii_disabled_warning(**policy); !warning.empty()) {
    spdlog::warn("policy reload ({}): {}", trigger, warning);
  }
  policy_.store(std::move(*policy));
  RouterMetrics::count_reload("applied");
  RouterMetrics::set_policy_version(version);
  spdlog::info("policy reload ({}): now {}", trigger, version);
  return version;
}

bool Router::reload_if_changed() {
  if (policy_file_.empty() && thresholds_file_.empty() && complexity_model_dir_.empty()) return false;
  {
    // The stamps are written by reload() under the mutex (an admin reload may run right now).
    std::lock_guard lock(reload_mutex_);
    if (!watch_.ready(stamp())) return false;
  }
  (void)reload("file change");
  return true;
}

asio::thread_pool& Router::reload_thread() {
  std::lock_guard lock(reload_thread_mutex_);
  if (!reload_thread_) reload_thread_ = std::make_unique<asio::thread_pool>(1);
  return *reload_thread_;
}

awaitable<Result<std::string>> Router::reload_async(std::string trigger) {
  return run_on<Result<std::string>>(
      reload_thread(), [this, trigger = std::move(trigger)] { return reload(trigger); });
}

awaitable<bool> Router::reload_if_changed_async() {
  return run_on<bool>(reload_thread(), [this] { return reload_if_changed(); });
}

}  // namespace hengshi::router
