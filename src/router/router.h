// Router: the server's handle on routing — the current policy snapshot (hot-swappable), the
// runtime it learns into, and the files it reloads from. decide() itself is a free function
// (decide.h) so `hengshi route` and the benchmarks run exactly the same code.
//
// Reload (POST /admin/reload, SIGHUP, a file change): a new snapshot is loaded and validated off
// to the side, then swapped in atomically; a bad file is refused with its reason and the running
// policy stays. What the router has learned survives a reload: the runtime (latency windows,
// edge LLM speed, sessions) is sized and seeded from the policy at start, so `sessions.*` and
// the edge LLM priors take effect on restart; cloud P90 priors are read live.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "core/config.h"
#include "core/result.h"
#include "router/decide.h"
#include "router/router_policy.h"

namespace hengshi::router {

class Router {
 public:
  // Loads the policy named by config.routing; errors name the file and field.
  static Result<std::unique_ptr<Router>> create(const Config& config);

  // The snapshot a request uses from start to end.
  std::shared_ptr<const RouterPolicy> policy() const { return policy_.load(); }

  Decision decide(const RouteInput& input, const RouterPolicy& policy,
                  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());
  RouterRuntime& runtime() { return *runtime_; }

  // Reloads both files. On error the old policy keeps running and the error is returned.
  Result<std::string> reload(const std::string& trigger);
  // Reloads when either file's modification time changed since the last load (file watcher).
  void reload_if_changed();

  const std::string& policy_file() const { return policy_file_; }
  const std::string& thresholds_file() const { return thresholds_file_; }

 private:
  Router(std::shared_ptr<const RouterPolicy> policy, std::string policy_file, std::string thresholds_file);
  std::filesystem::file_time_type stamp() const;

  std::atomic<std::shared_ptr<const RouterPolicy>> policy_;
  std::unique_ptr<RouterRuntime> runtime_;
  std::string policy_file_;
  std::string thresholds_file_;
  std::mutex reload_mutex_;  // one reload at a time
  std::filesystem::file_time_type loaded_stamp_;
};

}  // namespace hengshi::router
