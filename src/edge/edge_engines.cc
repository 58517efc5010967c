#include "edge/edge_engines.h"

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
#endif

std::string EdgeEngines::intent_model_id() const {
  return intent ? "intent:" + intent->model_version() : std::string();
}

std::string EdgeEngines::llm_model_id() const {
#ifdef HENGSHI_HAVE_LLAMA
  if (llm) return llm->model_description();
#endif
  return {};
}

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
    LlmConfig llm_config;
    llm_config.model_path = config.llm.model_path;
    llm_config.threads = config.llm.threads;
    llm_config.context_tokens = config.llm.context_tokens;
    llm_config.max_tokens = config.llm.max_tokens;
    llm_config.workers = config.llm.workers;
    llm_config.max_queue = config.llm.max_queue;
    llm_config.summary_turns = config.llm.summary_turns;
    llm_config.summary_chars = config.llm.summary_chars;
    auto llm = LlmEngine::load(llm_config);
    if (!llm) return Error{llm.error().code, "edge.llm.model_path: " + llm.error().message};
    engines.llm = std::move(*llm);
#else
    return Error{"llm_unavailable", "edge.llm.model_path is set but this build has no llama.cpp "
                                    "(configure with HENGSHI_WITH_LLAMA=ON after scripts/fetch-llama)"};
#endif
  }
  return engines;
}

}  // namespace hengshi::edge
