// Router: the server's handle on routing — the current policy snapshot (hot-swappable), the
// runtime it learns into, and the files it reloads from. decide() itself is a free function
// (decide.h) so `hengshi route` and the benchmarks run exactly the same code.
//
// Reload (POST /admin/reload, SIGHUP, a file change): a new snapshot — policy, thresholds and the
// complexity model (routing.complexity_model) — is loaded and validated off to the side, then swapped in atomically; a bad file is refused with its reason and the running
// policy stays. What the router has learned survives a reload: the runtime (latency windows,
// edge LLM speed, sessions) is sized and seeded from the policy at start, so `sessions.*` and
// the edge LLM priors take effect on restart; cloud P90 priors are read live.
// Reading and parsing the files never runs on an I/O thread: reload_async() runs the reload on
// the router's own reload thread and resumes the caller on its executor. The file watcher only
// loads a file that has stopped changing (size and mtime the same on two polls in a row), so a
// file caught half-written is left until the writer is done.
// Thread-safety: every method may be called from any thread. Destruction waits for a reload in
// progress; the executors of pending reload_async() calls must still be running then.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/asio.h"
#include "core/config.h"
#include "core/result.h"
#include "core/stable_file_change.h"
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

  ~Router();

  // Reloads both files on the calling thread (blocking: file I/O and parsing). On error the old
  // policy keeps running and the error is returned.
  Result<std::string> reload(const std::string& trigger);
  // The same, run on the router's reload thread; the awaiting coroutine resumes on its own
  // executor with the result. For POST /admin/reload and SIGHUP on an I/O thread.
  awaitable<Result<std::string>> reload_async(std::string trigger);
  // File watcher tick (call every watch_interval_ms, off the I/O threads): reloads when any
  // file's size or modification time differs from the last load and has stayed the same since
  // the previous tick. Returns true when it attempted a reload.
  bool reload_if_changed();
  // The same tick on the reload thread, resuming the caller on its executor (for a watch timer
  // on an I/O thread).
  awaitable<bool> reload_if_changed_async();

  const std::string& policy_file() const { return policy_file_; }
  const std::string& thresholds_file() const { return thresholds_file_; }
  const std::string& complexity_model_dir() const { return complexity_model_dir_; }

 private:
  Router(std::shared_ptr<const RouterPolicy> policy, std::string policy_file,
         std::string thresholds_file, std::string complexity_model_dir);

  // policy file, thresholds file, the complexity model's manifest.json (rewritten last by a
  // retrain's rename, so a new model shows as a new manifest)
  FileStamp stamp() const;
  boost::asio::thread_pool& reload_thread();

  std::atomic<std::shared_ptr<const RouterPolicy>> policy_;
  std::unique_ptr<RouterRuntime> runtime_;
  std::string policy_file_;
  std::string thresholds_file_;
  std::string complexity_model_dir_;  // "" = the hand-written complexity score
  std::mutex reload_mutex_;  // one reload at a time; guards `watch_`
  StableFileChange watch_;   // the files as last loaded, and a change not loaded yet
  std::mutex reload_thread_mutex_;
  std::unique_ptr<boost::asio::thread_pool> reload_thread_;  // made on first reload_async()
};

}  // namespace hengshi::router
