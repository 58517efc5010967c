// EdgeEngines: the edge models one gateway process serves with — the intent engine and the
// embedded LLM's live slot — loaded at start from the `edge:` config (the LLM's from its
// promotion history when there is one). Either may be absent (not configured); one that is
// configured but fails to load is an error, so the server refuses to start rather than quietly
// serve without its edge. The LLM's version changes later through `control` (promote, rollback).
//
// Ownership: shares the engines with the server for its lifetime. Thread-safety: the engines and
// the slot are safe to call concurrently (see their headers).
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "core/result.h"
#include "edge/edge_control.h"
#include "edge/intent_engine.h"
#include "edge/llm_slot.h"

namespace hengshi::edge {

struct EdgeEngines {
  std::shared_ptr<const IntentEngine> intent;  // null when edge.intent_model is ""
  std::shared_ptr<LlmSlot> llm;                // null when edge.llm.model_path is ""
  std::shared_ptr<EdgeControl> control;        // promote / rollback; null without an edge LLM

  // Model identity for metadata: "intent:<version>" / the serving LLM's description.
  std::string intent_model_id() const;
  std::string llm_model_id() const;
};

// Errors name the config field and the file: "edge.intent_model: <dir>: ...".
Result<EdgeEngines> load_edge_engines(const EdgeConfig& config);

// Whether this build has the llama.cpp engine (HENGSHI_WITH_LLAMA and a llama.cpp build found).
bool llm_engine_available();

}  // namespace hengshi::edge
