#include "edge/edge_engines.h"

#include <filesystem>

#ifdef HENGSHI_HAVE_LLAMA
#include "edge/llm_lifecycle.h"
#endif

namespace hengshi::edge {

#ifndef HENGSHI_HAVE_LLAMA
// Without llama.cpp, llm_engine.cc is not built; EdgeEngines still owns a (always null) pointer.
// The server's edge-LLM path still links against these; they are never reached (llm is null).
struct LlmEngine::Impl {};
LlmEngine::~LlmEngine() = default;
awaitable<Result<Generation>> LlmEngine::generate(GenerationRequest, PieceSink, CancelToken) {
  co_return Error{"edge_llm_stopped", "this build has no edge LLM (llama.cpp)"};
}
std::vector<ChatMessage> LlmEngine::edge_messages(const std::vector<ChatMessage>& conversation) const {
  return conversation;
}
std::string_view to_string(FinishReason reason) {
  return reason == FinishReason::stop ? "stop" : "length";
}
const LlmConfig& LlmEngine::config() const {
  static const LlmConfig none;
  return none;
}
int LlmEngine::context_tokens() const { return 0; }
bool LlmEngine::has_adapter(const std::string&) const { return false; }
std::string LlmEngine::model_label(const std::string&) const { return {}; }
#endif

std::string EdgeEngines::intent_model_id() const {
  return intent ? "intent:" + intent->model_version() : std::string();
}

std::string EdgeEngines::llm_model_id() const { return llm ? llm->current()->description : std::string(); }

bool llm_engine_available() {
#ifdef HENGSHI_HAVE_LLAMA
  return true;
#else
  return false;
#endif
}

Result<EdgeEngines> load_edge_engines(const EdgeConfig& config) {
  EdgeEngines engines;
  if (!config.intent_model.empty()) {
    auto intent = IntentEngine::load(config.intent_model);
    if (!intent) {
      return Error{intent.error().code, "edge.intent_model: " + intent.error().message};
    }
    engines.intent = std::move(*intent);
  }
  if (!config.llm.model_path.empty()) {
#ifdef HENGSHI_HAVE_LLAMA
    auto lifecycle = LlmLifecycle::start(config.llm, engines.intent);
    if (!lifecycle) return lifecycle.error();
    engines.llm = (*lifecycle)->slot();
    engines.control = std::shared_ptr<EdgeControl>(std::move(*lifecycle));
#else
    return Error{"llm_unavailable", "edge.llm.model_path is set but this build has no llama.cpp "
                                    "(configure with HENGSHI_WITH_LLAMA=ON after scripts/fetch-llama)"};
#endif
  }
  return engines;
}

}  // namespace hengshi::edge
