// EdgeEngines: the edge models one gateway process serves with — the intent engine and the
// embedded LLM — loaded once at start from the `edge:` config. Either may be absent (not
// configured); one that is configured but fails to load is an error, so the server refuses to
// start rather than quietly serve without its edge.
//
// Ownership: owns both engines; the server borrows them for its lifetime. Thread-safety: both
// engines are safe to call concurrently (see their headers).
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "core/result.h"
#include "edge/intent_engine.h"
#include "edge/llm_engine.h"

namespace hengshi::edge {

struct EdgeEngines {
  std::shared_ptr<const IntentEngine> intent;  // null when edge.intent_model is ""
  std::unique_ptr<LlmEngine> llm;              // null when edge.llm.model_path is ""

  // Model identity for metadata: "intent:<version>" / the LLM's description.
  std::string intent_model_id() const;
  std::string llm_model_id() const;
};

// Errors name the config field and the file: "edge.intent_model: <dir>: ...".
Result<EdgeEngines> load_edge_engines(const EdgeConfig& config);

// Whether this build has the llama.cpp engine (HENGSHI_WITH_LLAMA and a llama.cpp build found).
bool llm_engine_available();

}  // namespace hengshi::edge
