#include "edge/edge_engines.h"

#include <filesystem>

#include "edge/model_manifest.h"

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

#ifdef HENGSHI_HAVE_LLAMA
// An adapter directory as `hengshi finetune --output lora` wrote it: its files match the
// manifest, and it was trained on the configured base model (by hash), so a stale or foreign
// adapter is refused instead of silently producing another model's answers.
Result<LlmAdapterConfig> checked_adapter(const std::string& task, const EdgeAdapterConfig& adapter,
                                         const ManifestFile& base, const std::string& base_path) {
  const std::string field = "edge.llm.adapters." + task;
  auto manifest = load_verified_manifest(adapter.dir, kEdgeLlmManifest);
  if (!manifest) return Error{manifest.error().code, field + ": " + manifest.error().message};
  if (manifest->training.value("kind", "") != "lora") {
    return Error{"model_invalid", field + ": " + adapter.dir + " holds a full model, not a LoRA adapter"};
  }
  if (auto trained = check_trained_base(*manifest, adapter.dir, base, base_path); !trained) {
    return Error{trained.error().code, field + ": " + trained.error().message};
  }
  return LlmAdapterConfig{task, (std::filesystem::path(adapter.dir) / manifest->model_file).string(),
                          static_cast<float>(adapter.scale), manifest->model_version};
}
#endif

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
    // The base is hashed once (it may be gigabytes), then each adapter is checked against it.
    Result<ManifestFile> base = ManifestFile{};
    if (!config.llm.adapters.empty()) base = describe_path(config.llm.model_path);
    if (!base) return Error{base.error().code, "edge.llm.model_path: " + base.error().message};
    for (const auto& [task, adapter] : config.llm.adapters) {
      auto checked = checked_adapter(task, adapter, *base, config.llm.model_path);
      if (!checked) return checked.error();
      llm_config.adapters.push_back(std::move(*checked));
    }
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
