#include "edge/llm_embedder.h"

#include <llama.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <mutex>

#include "edge/llm_runtime.h"

namespace hengshi::edge {

struct LlmEmbedder::Impl {
  llama_model* model = nullptr;
  llama_context* context = nullptr;
  const llama_vocab* vocab = nullptr;
  int dim = 0;
  int context_tokens = 512;
  std::string name;
  std::string pooling;
  mutable std::mutex mutex;  // one decode at a time on the context

  ~Impl() {
    if (context) llama_free(context);
    if (model) llama_model_free(model);
  }
};

LlmEmbedder::LlmEmbedder() : impl_(std::make_unique<Impl>()) {}
LlmEmbedder::~LlmEmbedder() = default;

const std::string& LlmEmbedder::name() const { return impl_->name; }
int LlmEmbedder::dim() const { return impl_->dim; }
std::string LlmEmbedder::pooling() const { return impl_->pooling; }

Result<std::unique_ptr<LlmEmbedder>> LlmEmbedder::load(const std::string& model_path, int threads,
                                                       int context_tokens) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec)) {
    return Error{"model_missing", "embedding model " + model_path + " does not exist"};
  }
  init_llama_once();
  std::unique_ptr<LlmEmbedder> embedder(new LlmEmbedder());
  Impl& impl = *embedder->impl_;
  {
    LlamaLogCapture capture;
    llama_model_params params = llama_model_default_params();
    params.n_gpu_layers = 0;
    impl.model = llama_model_load_from_file(model_path.c_str(), params);
    if (impl.model == nullptr) {
      return Error{"model_load_failed", "cannot load embedding model " + model_path + ": " +
                                            (capture.text().empty() ? "unknown error" : capture.text())};
    }
  }
  impl.vocab = llama_model_get_vocab(impl.model);
  impl.dim = llama_model_n_embd(impl.model);
  impl.context_tokens = std::max(16, std::min(context_tokens, llama_model_n_ctx_train(impl.model)));
  // The model's own pooling; one that names none (a chat model's GGUF) is mean-pooled.
  for (const enum llama_pooling_type requested : {LLAMA_POOLING_TYPE_UNSPECIFIED, LLAMA_POOLING_TYPE_MEAN}) {
    llama_context_params params = llama_context_default_params();
    params.n_ctx = static_cast<std::uint32_t>(impl.context_tokens);
    params.n_batch = params.n_ctx;
    params.n_ubatch = params.n_ctx;
    params.n_seq_max = 1;
    params.n_threads = std::max(1, threads);
    params.n_threads_batch = std::max(1, threads);
    params.embeddings = true;
    params.pooling_type = requested;
    params.no_perf = true;
    LlamaLogCapture capture;
    impl.context = llama_init_from_model(impl.model, params);
    if (impl.context == nullptr) {
      return Error{"context_failed", "cannot create an embedding context for " + model_path + ": " + capture.text()};
    }
    const enum llama_pooling_type used = llama_pooling_type(impl.context);
    if (used == LLAMA_POOLING_TYPE_MEAN || used == LLAMA_POOLING_TYPE_CLS || used == LLAMA_POOLING_TYPE_LAST) {
      impl.pooling = used == LLAMA_POOLING_TYPE_MEAN ? "mean" : used == LLAMA_POOLING_TYPE_CLS ? "cls" : "last";
      if (requested == LLAMA_POOLING_TYPE_MEAN) impl.pooling += " (default: the model names no pooling)";
      break;
    }
    llama_free(impl.context);
    impl.context = nullptr;
  }
  if (impl.context == nullptr) {
    return Error{"context_failed", "embedding model " + model_path + " pools neither by mean, cls nor last"};
  }
  char desc[128] = {};
  llama_model_desc(impl.model, desc, sizeof desc);
  impl.name = "llama-" + std::filesystem::path(model_path).filename().string() + "-" +
              std::to_string(std::filesystem::file_size(model_path, ec));
  spdlog::info("cache embedder: {} ({}, {} dims, pooling {})", model_path, desc, impl.dim, impl.pooling);
  return embedder;
}

Result<std::vector<float>> LlmEmbedder::embed(std::string_view text) const {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  const int length = static_cast<int>(std::min<std::size_t>(text.size(), 1 << 20));
  int count = -llama_tokenize(impl.vocab, text.data(), length, nullptr, 0, true, true);
  std::vector<llama_token> tokens(static_cast<std::size_t>(std::max(count, 0)));
  if (count > 0) llama_tokenize(impl.vocab, text.data(), length, tokens.data(), count, true, true);
  std::vector<float> vector(static_cast<std::size_t>(impl.dim), 0.0f);
  if (tokens.empty()) return vector;
  // Longer questions keep their end, where the question usually is.
  if (tokens.size() > static_cast<std::size_t>(impl.context_tokens)) {
    tokens.erase(tokens.begin(), tokens.end() - impl.context_tokens);
  }
  llama_memory_clear(llama_get_memory(impl.context), /*data=*/true);
  llama_batch batch = llama_batch_init(static_cast<int>(tokens.size()), 0, 1);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    batch.token[i] = tokens[i];
    batch.pos[i] = static_cast<llama_pos>(i);
    batch.n_seq_id[i] = 1;
    batch.seq_id[i][0] = 0;
    batch.logits[i] = 1;  // every position feeds the pooling
  }
  batch.n_tokens = static_cast<int>(tokens.size());
  const int status = llama_model_has_encoder(impl.model) && !llama_model_has_decoder(impl.model)
                         ? llama_encode(impl.context, batch)
                         : llama_decode(impl.context, batch);
  if (status != 0) {
    llama_batch_free(batch);
    return Error{"embed_failed", "llama.cpp could not embed the text (status " + std::to_string(status) + ")"};
  }
  const float* pooled = llama_get_embeddings_seq(impl.context, 0);
  if (pooled == nullptr) {
    llama_batch_free(batch);
    return Error{"embed_failed", "llama.cpp returned no pooled embedding"};
  }
  vector.assign(pooled, pooled + impl.dim);
  llama_batch_free(batch);
  normalize_unit(vector);
  return vector;
}

}  // namespace hengshi::edge
