// LlmEngine: the embedded edge LLM (llama.cpp). Loads one GGUF model and generates chat answers
// on its own bounded pool of worker threads — never on an Asio I/O thread (DESIGN.md §3). Each
// worker owns one llama context, so `workers` generations run at once and the rest wait in a
// bounded queue. Every answer carries a confidence computed from its token probabilities.
//
// This header is the boundary around llama.cpp (STYLE.md): it includes no llama.cpp header, so
// the rest of the gateway builds against it alone.
//
// Thread-safety: generate() and generate_blocking() may be called concurrently from any thread.
// The engine must outlive every call on it; destroying it cancels running generations and fails
// queued ones with "edge_llm_stopped".
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "core/asio.h"
#include "core/cancel_token.h"
#include "core/chat_request.h"
#include "core/deadline.h"
#include "core/result.h"
#include "edge/llm_text.h"

namespace hengshi::edge {

// A LoRA adapter GGUF applied on top of the base model to the requests that name it.
struct LlmAdapterConfig {
  std::string name;    // what GenerationRequest::adapter names (a task type, say)
  std::string path;    // the adapter GGUF (`hengshi finetune --output lora` writes adapter.gguf)
  float scale = 1.0f;  // 0 switches it off, 1 applies the fine-tuned delta as trained
  std::string version;  // its manifest's model_version, shown in the response metadata
};

struct LlmConfig {
  std::string model_path;     // a GGUF file
  std::string model_version;  // a fine-tuned model's manifest version, shown in model_label()
  std::vector<LlmAdapterConfig> adapters;
  // true: each adapter is folded into its own copy of the base at load (llm_lora_merge.h), and
  // its requests run on that copy at the base's speed, for one model's memory per adapter.
  // false: llama.cpp applies B·A at every token of the requests that name it.
  bool merge_adapters = false;
  int threads = 0;            // compute threads per generation; 0 = cores / workers (at least 1)
  int context_tokens = 2048;  // per worker (prompt + answer); 0 = the model's training context
  int max_tokens = 256;       // answer length when a request sets none
  int workers = 1;            // concurrent generations, one llama context each
  int max_queue = 64;         // generations waiting for a worker; more are refused (edge_llm_busy)
  int summary_turns = 3;      // edge prompt: last user turns kept (build_edge_messages)
  int summary_chars = 200;    // edge prompt: each earlier message cut to this many characters

  // Field-level checks; the error names the field.
  Status validate() const;
};

struct GenerationRequest {
  std::vector<ChatMessage> messages;  // as sent to the model; see LlmEngine::edge_messages()
  int max_tokens = 0;                 // 0 = LlmConfig::max_tokens; capped by the free context
  std::vector<std::string> stop;      // no text at or past one of these is returned
  float temperature = 0.0f;           // 0 = greedy
  int top_k = 40;                     // with temperature > 0
  float top_p = 0.95f;                // with temperature > 0
  std::uint64_t seed = 0;             // with temperature > 0
  std::string adapter;                // a configured adapter's name; empty = the base model
  Deadline deadline;                  // generation stops at the first token past it
};

enum class FinishReason {
  stop,       // end-of-generation token or a stop sequence
  length,     // max_tokens (or the context) reached
  cancelled,  // CancelToken / stop_token fired, or the piece sink returned false
  deadline,   // the request's deadline passed
};
std::string_view to_string(FinishReason reason);

// Confidence of an answer from the probability the model gave each token it chose (softmax of
// the raw logits, temperature 1), over every sampled token including a final end token.
// Uncalibrated: the router calibrates it per task type. All values are finite.
struct TokenConfidence {
  int tokens = 0;
  double mean_prob = 0.0;    // in (0, 1]; 0 only when no token was sampled
  double min_prob = 0.0;     // in (0, 1]; 0 only when no token was sampled
  double sum_logprob = 0.0;  // natural log, <= 0
};

struct Generation {
  std::string text;  // the answer (stop sequence excluded); equals the concatenated pieces
  FinishReason finish_reason = FinishReason::stop;
  int prompt_tokens = 0;
  int completion_tokens = 0;  // tokens of the answer (not counting an end token)
  TokenConfidence confidence;
  std::chrono::microseconds queued{0};       // waiting for a worker
  std::chrono::microseconds prompt_eval{0};  // tokenising + decoding the prompt
  std::chrono::microseconds generation{0};   // sampling + decoding the answer
  std::chrono::microseconds decode{0};       // the part of `generation` inside llama_decode
  std::chrono::microseconds first_piece{0};  // from submission to the first emitted text
};

// Receives each piece of answer text in order, on the caller's executor; returns false to stop
// the generation (finish_reason cancelled).
using PieceSink = std::function<awaitable<bool>(std::string_view piece)>;
// Blocking variant: runs on the worker thread while the caller waits.
using BlockingPieceSink = std::function<bool(std::string_view piece)>;

class LlmEngine {
 public:
  // Loads the model and its adapters and creates the workers. Errors (code, message naming the
  // file): model_not_found, model_corrupt (not a GGUF / truncated), model_unsupported_architecture,
  // model_load_failed, adapter_load_failed, context_failed, config_invalid.
  static Result<std::unique_ptr<LlmEngine>> load(const LlmConfig& config);
  ~LlmEngine();
  LlmEngine(const LlmEngine&) = delete;
  LlmEngine& operator=(const LlmEngine&) = delete;

  // Streams an answer. Pieces go to `on_piece` (may be empty) as they are generated, on the
  // executor of the awaiting coroutine; the coroutine resumes with the whole answer.
  // `cancel` must belong to the caller's strand (see CancelToken); firing it stops generation
  // within one token. Errors: edge_llm_busy (queue full), prompt_too_long, prompt_empty,
  // adapter_unknown, decode_failed, edge_llm_stopped.
  awaitable<Result<Generation>> generate(GenerationRequest request, PieceSink on_piece,
                                         CancelToken cancel);

  // Same, blocking the calling thread (CLI, benchmarks, tests). Do not call on an I/O thread.
  Result<Generation> generate_blocking(const GenerationRequest& request,
                                       const BlockingPieceSink& on_piece = {},
                                       std::stop_token stop = {});

  // The edge prompt for a conversation: system + a summary of the last summary_turns turns.
  std::vector<ChatMessage> edge_messages(const std::vector<ChatMessage>& conversation) const;
  bool has_adapter(const std::string& name) const;
  // What answered, for the metadata and the log: "<model file>[@<model version>]", then
  // "+<adapter>@<adapter version>" when an adapter did.
  std::string model_label(const std::string& adapter) const;
  // The prompt text the model sees for `messages` (chat template applied).
  std::string format_prompt(const std::vector<ChatMessage>& messages) const;
  // Token ids of `text` as the model tokenises a prompt (special tokens parsed).
  std::vector<std::int32_t> tokenize(std::string_view text) const;

  const LlmConfig& config() const;
  // Model identity for response metadata, e.g. "qwen2 0.5B Q4_K - Medium (file.gguf)".
  const std::string& model_description() const;
  // Where the chat template came from: "model", "chatml (fallback)" or "plain (fallback)".
  const std::string& chat_template_source() const;
  int context_tokens() const;  // per worker, as created
  int threads() const;         // per generation, as resolved
  int queue_depth() const;     // generations waiting for a worker now

  struct Impl;

 private:
  explicit LlmEngine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace hengshi::edge
