// LlmSlot: the edge LLM's live slot. It holds the serving version — one loaded engine (base model
// + its adapters) with the state it was loaded from — and the version before it, kept loaded so
// a rollback is a pointer swap. A request takes the current version once (current()) and keeps
// it to the end: a swap never changes the engine under a running generation, and the replaced
// engine is freed when its last generation ends.
//
// Thread-safety: every member may be called concurrently; a swap is atomic for readers.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "edge/llm_engine.h"
#include "edge/serving_state.h"

namespace hengshi::edge {

struct LlmServing {
  std::shared_ptr<LlmEngine> engine;  // never null
  ServingState state;                 // adapter versions filled in
  std::string description;            // the engine's model description, for metadata
  std::string loaded_at;              // ISO-8601 UTC
};

class LlmSlot {
 public:
  // `keep_previous` false (edge.llm.keep_previous): a swap frees the version it replaces once its
  // last generation ends, so one version is in memory, not two; a rollback then loads.
  explicit LlmSlot(std::shared_ptr<const LlmServing> serving, bool keep_previous = true);

  std::shared_ptr<const LlmServing> current() const;
  // The version a swap replaced, still loaded; null before the first swap.
  std::shared_ptr<const LlmServing> previous() const;
  // Puts `next` in service; the one serving until now becomes previous() (when kept).
  void swap_in(std::shared_ptr<const LlmServing> next);
  // Puts previous() back in service and forgets the one serving (it is freed when its last
  // generation ends); false when there is no previous version loaded.
  bool swap_back();

 private:
  // hengshi_edge_llm_model_info: 1 for the series of what serves, 0 for what stopped serving.
  static void publish(const LlmServing* stopped, const LlmServing& serving);

  const bool keep_previous_;
  mutable std::mutex mutex_;
  std::shared_ptr<const LlmServing> current_;
  std::shared_ptr<const LlmServing> previous_;
};

}  // namespace hengshi::edge
