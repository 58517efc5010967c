// LlmLifecycle: the edge LLM's versions in a running gateway (DESIGN-NOTES "Edge model
// lifecycle"). It loads what serves into the live slot (LlmSlot) — the promotion history's last
// state, else the config's — and implements EdgeControl:
//   promote   load the candidate directory on the side (manifest and hashes checked; a LoRA
//             adapter must be trained on the serving base), run the regression gate against a
//             fresh copy of what serves, and swap the candidate in only when it passes;
//   rollback  back to the state under the current one in the history: a pointer swap when that
//             version is still loaded (the one just replaced), else a load;
//   watch     every edge.llm.watch_interval_ms, a serving directory that now holds another
//             version (ServingDirWatch) is promoted like the above, by "watch", gate included.
// Every attempt is a history line, a log line and a metric; a refused or failed one leaves the
// serving version untouched.
//
// Ownership: shares the slot with the request path. Thread-safety: changes run one at a time on
// the lifecycle's own thread; status() may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/config.h"
#include "core/result.h"
#include "edge/edge_control.h"
#include "edge/edge_history.h"
#include "edge/intent_engine.h"
#include "edge/llm_slot.h"
#include "edge/serving_dir_watch.h"

namespace hengshi::edge {

// Loads `state` with the engine knobs of `knobs`: checks a promoted full model's directory and
// each adapter's manifest (and that it was trained on this base), hashes the base, loads the
// engine. The returned state has the versions filled in; versions already in `state` (from
// the history) must match the manifests, so a directory rewritten since its promotion is refused.
// Errors name the config field or the directory.
Result<std::shared_ptr<const LlmServing>> load_serving(const EdgeLlmConfig& knobs, ServingState state);

class LlmLifecycle : public EdgeControl {
 public:
  // Reads the history (edge.llm.history, when set) and loads what it says serves; when that
  // cannot load, the config's state serves and the failure is logged and shown in status().
  // `intent`: the gateway's intent engine, when it has one: the gate then judges intent
  // agreement against its predictions instead of the regression set's labels.
  static Result<std::unique_ptr<LlmLifecycle>> start(const EdgeLlmConfig& config,
                                                     std::shared_ptr<const IntentEngine> intent = nullptr);
  ~LlmLifecycle() override;

  std::shared_ptr<LlmSlot> slot() const { return slot_; }
  awaitable<EdgeOutcome> promote(PromoteRequest request) override;
  awaitable<EdgeOutcome> rollback(std::string by) override;
  nlohmann::json status(bool brief) const override;

  // The blocking bodies of promote() and rollback() (CLI tools and tests call them directly).
  EdgeOutcome promote_now(const PromoteRequest& request);
  EdgeOutcome rollback_now(const std::string& by);

 private:
  LlmLifecycle(EdgeLlmConfig config, std::optional<EdgeHistory> history, std::shared_ptr<LlmSlot> slot,
               std::string source, std::shared_ptr<const IntentEngine> intent);
  // Records `entry` (history, log, metrics) and builds the outcome.
  EdgeOutcome finish(HistoryEntry& entry, std::string code, std::string message);
  Result<nlohmann::json> run_gate(const PromoteRequest& request, const LlmServing& baseline,
                                  const LlmServing& candidate, bool& passed) const;
  // The watch: started at start() when the interval, the history and the gate's data are set;
  // the timer is armed and each tick runs on thread_.
  void start_watch();
  void arm_watch();
  void watch_tick();

  EdgeLlmConfig config_;
  std::shared_ptr<LlmSlot> slot_;
  std::shared_ptr<const IntentEngine> intent_;  // may be null
  std::string source_;  // where the serving state at start came from
  mutable std::mutex mutex_;  // history_ and changing_
  std::optional<EdgeHistory> history_;
  bool changing_ = false;
  std::unique_ptr<asio::thread_pool> thread_;
  ServingDirWatch watch_;                       // only touched on thread_
  std::unique_ptr<asio::steady_timer> watch_timer_;  // null when not watching
  std::string watch_off_;                       // why not watching ("" when watching); set once at start
  std::atomic<bool> stopping_{false};
};

}  // namespace hengshi::edge
