#include "edge/llm_engine.h"

#include <ggml-cpu.h>
#include <gguf.h>
#include <llama.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>

#include <unistd.h>

#include "edge/llm_chat_format.h"
#include "edge/llm_lora_merge.h"
#include "edge/llm_runtime.h"
#include "edge/llm_sampling.h"
#include "obs/metrics.h"

namespace hengshi::edge {
namespace {

using std::chrono::duration_cast;
using std::chrono::microseconds;

// ---- metrics (declared in one place, STYLE.md) ----

struct LlmMetrics {
  obs::Counter& prompt_tokens;
  obs::Counter& completion_tokens;
  obs::Histogram& generation_seconds;
  obs::Gauge& queue_depth;

  static LlmMetrics& get() {
    auto& r = obs::Registry::global();
    static LlmMetrics metrics{
        r.counter("hengshi_edge_llm_tokens_total", "Tokens processed by the edge LLM",
                  {{"kind", "prompt"}}),
        r.counter("hengshi_edge_llm_tokens_total", "Tokens processed by the edge LLM",
                  {{"kind", "completion"}}),
        r.histogram("hengshi_edge_llm_generation_seconds",
                    "Edge LLM generation time on a worker (prompt + answer)"),
        r.gauge("hengshi_edge_llm_queue_depth", "Edge LLM generations waiting for a worker"),
    };
    return metrics;
  }
};

// ---- sampling ----

struct Sampled {
  llama_token token = 0;
  double logprob = 0.0;  // under the model's own distribution (temperature 1)
};

// Log-probabilities are clamped so that confidences stay finite even for a degenerate model.
constexpr double kMinLogprob = -1000.0;

// Chooses the next token and returns its log-probability under softmax(logits).
// Greedy when temperature <= 0; otherwise top-k, then top-p, then a draw at the temperature.
Sampled sample_token(const float* logits, int vocab_size, const GenerationRequest& request,
                     std::mt19937_64& rng, std::vector<std::pair<float, llama_token>>& scratch) {
  const LogitStats stats = logit_stats(logits, vocab_size);
  const float max_logit = stats.max_logit;
  const auto argmax = static_cast<llama_token>(stats.argmax);
  if (!std::isfinite(max_logit)) return {argmax, kMinLogprob};
  auto logprob_of = [&](llama_token token) {
    const double lp = static_cast<double>(logits[token] - max_logit) - stats.log_sum_exp;
    return std::isfinite(lp) ? std::clamp(lp, kMinLogprob, 0.0) : kMinLogprob;
  };

  if (request.temperature <= 0.0f) return {argmax, logprob_of(argmax)};

  const int k = request.top_k > 0 ? std::min(request.top_k, vocab_size) : vocab_size;
  scratch.clear();
  scratch.reserve(static_cast<std::size_t>(vocab_size));
  for (int i = 0; i < vocab_size; ++i) {
    if (!std::isnan(logits[i])) scratch.emplace_back(logits[i], i);
  }
  const auto keep = std::min<std::size_t>(static_cast<std::size_t>(k), scratch.size());
  std::partial_sort(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(keep),
                    scratch.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  scratch.resize(keep);

  std::vector<double> weights(keep);
  double total = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    weights[i] = std::exp(static_cast<double>(scratch[i].first - max_logit) / request.temperature);
    total += weights[i];
  }
  // Top-p: the smallest prefix whose probability reaches top_p.
  std::size_t cut = keep;
  if (request.top_p > 0.0f && request.top_p < 1.0f) {
    double cumulative = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
      cumulative += weights[i] / total;
      if (cumulative >= request.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  double mass = 0.0;
  for (std::size_t i = 0; i < cut; ++i) mass += weights[i];
  const double draw = static_cast<double>(rng() >> 11) * 0x1.0p-53 * mass;
  double cumulative = 0.0;
  for (std::size_t i = 0; i < cut; ++i) {
    cumulative += weights[i];
    if (draw < cumulative) return {scratch[i].second, logprob_of(scratch[i].second)};
  }
  return {scratch[cut - 1].second, logprob_of(scratch[cut - 1].second)};
}

class ConfidenceAccumulator {
 public:
  void add(double logprob) {
    const double prob = std::max(std::exp(logprob), std::numeric_limits<double>::min());
    ++tokens_;
    sum_logprob_ += logprob;
    sum_prob_ += prob;
    min_prob_ = std::min(min_prob_, prob);
  }
  TokenConfidence result() const {
    if (tokens_ == 0) return {};
    return {tokens_, std::min(1.0, sum_prob_ / tokens_), std::min(1.0, min_prob_), sum_logprob_};
  }

 private:
  int tokens_ = 0;
  double sum_logprob_ = 0.0;
  double sum_prob_ = 0.0;
  double min_prob_ = 1.0;
};

// ---- jobs and the hand-off to the awaiting coroutine ----

struct Job {
  GenerationRequest request;
  BlockingPieceSink emit;                        // worker thread; false = stop
  std::function<void(Result<Generation>)> done;  // worker thread, exactly once
  std::atomic<bool> cancelled{false};
  std::stop_token stop;
  Clock::time_point submitted = Clock::now();

  bool cancel_requested() const {
    return cancelled.load(std::memory_order_relaxed) || stop.stop_requested();
  }
  bool should_stop() const { return cancel_requested() || request.deadline.passed(); }
};

// Carries pieces and the final result from a worker thread to a coroutine. The coroutine waits
// with async_wait(); a worker's push()/finish() resumes it by posting the stored completion
// handler to the coroutine's own executor, so pieces are handled in order and none is lost.
class PieceChannel {
 public:
  struct Batch {
    std::deque<std::string> pieces;
    std::optional<Result<Generation>> result;
  };

  void push(std::string piece) {
    notify([&] { pieces_.push_back(std::move(piece)); });
  }
  void finish(Result<Generation> result) {
    notify([&] { result_.emplace(std::move(result)); });
  }

  Batch take() {
    std::lock_guard lock(mutex_);
    Batch batch{std::move(pieces_), std::move(result_)};
    pieces_.clear();
    result_.reset();
    return batch;
  }

  // Completes when there is something to take().
  template <typename CompletionToken>
  auto async_wait(CompletionToken&& token) {
    return asio::async_initiate<CompletionToken, void()>(
        [this](auto handler) {
          using Handler = decltype(handler);
          // Keep the coroutine's executor alive (io_context::run must not return) while waiting.
          auto executor = asio::prefer(asio::get_associated_executor(handler),
                                       asio::execution::outstanding_work.tracked);
          auto shared = std::make_shared<Handler>(std::move(handler));
          std::function<void()> wake = [shared, executor]() {
            asio::post(executor, [shared]() { (*shared)(); });
          };
          std::unique_lock lock(mutex_);
          if (!pieces_.empty() || result_) {
            lock.unlock();
            wake();
            return;
          }
          waiter_ = std::move(wake);
        },
        token);
  }

 private:
  template <typename Update>
  void notify(Update&& update) {
    std::function<void()> wake;
    {
      std::lock_guard lock(mutex_);
      update();
      wake = std::exchange(waiter_, nullptr);
    }
    if (wake) wake();
  }

  std::mutex mutex_;
  std::deque<std::string> pieces_;
  std::optional<Result<Generation>> result_;
  std::function<void()> waiter_;
};

std::string file_name(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

// The base with `adapter` folded in, loaded as a model of its own. The merged file is written to
// the temporary directory and unlinked once loaded: the model maps it, so the space is returned
// when the model is freed, and nothing is left behind by a crash after the load.
Result<llama_model*> load_merged(const std::string& base_path, const LlmAdapterConfig& adapter) {
  static std::atomic<int> serial{0};
  const auto merged_path = std::filesystem::temp_directory_path() /
                           ("hengshi-merged-" + std::to_string(::getpid()) + "-" +
                            std::to_string(serial.fetch_add(1)) + ".gguf");
  auto merged = merge_lora_adapter(base_path, adapter.path, adapter.scale, merged_path.string());
  if (!merged) {
    std::error_code ignored;
    std::filesystem::remove(merged_path, ignored);
    return Error{"adapter_load_failed", "cannot merge edge LLM adapter \"" + adapter.name + "\" into " +
                                            base_path + ": " + merged.error().message};
  }
  LlamaLogCapture capture;
  llama_model_params params = llama_model_default_params();
  params.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(merged_path.c_str(), params);
  std::error_code ignored;
  std::filesystem::remove(merged_path, ignored);
  if (model == nullptr) {
    return Error{"adapter_load_failed", "cannot load edge LLM adapter \"" + adapter.name + "\" merged into " +
                                            base_path + ": " + capture.text()};
  }
  spdlog::info("edge LLM adapter \"{}\" merged into {} ({} matrices, {:.2f} s)", adapter.name,
               file_name(base_path), merged->tensors, merged->seconds);
  return model;
}

}  // namespace

// ---- the engine ----

struct LlmEngine::Impl {
  struct Worker {
    Impl* engine = nullptr;
    // contexts[0] runs on the base model, contexts[i] on merged_models[i - 1]; `context` is the
    // one the current job runs on (apply_adapter picks it).
    std::vector<llama_context*> contexts;
    llama_context* context = nullptr;
    // A persistent compute thread pool, as llama-bench uses: without one ggml starts and joins
    // its threads for every token.
    ggml_threadpool* threadpool = nullptr;
    std::thread thread;
    std::atomic<Job*> current{nullptr};  // read by the abort callback during llama_decode
    const std::string* adapter = nullptr;  // the adapter set on `context`; null = none
  };
  struct Adapter {
    std::string name;
    llama_adapter_lora* lora = nullptr;  // freed with the model; null when merged
    float scale = 1.0f;
    std::size_t context = 0;  // merged: its index in Worker::contexts
  };

  LlmConfig config;
  llama_model* model = nullptr;
  std::vector<llama_model*> merged_models;  // one per merged adapter
  const llama_vocab* vocab = nullptr;
  int vocab_size = 0;
  int context_tokens = 0;
  int threads = 1;
  std::string description;
  ChatFormat chat;
  std::vector<Adapter> adapters;
  std::vector<std::unique_ptr<Worker>> workers;

  std::mutex queue_mutex;
  std::condition_variable queue_ready;
  std::deque<std::shared_ptr<Job>> queue;
  int running = 0;  // workers busy with a job
  bool stopping = false;

  ~Impl() {
    {
      std::lock_guard lock(queue_mutex);
      stopping = true;
      for (auto& worker : workers) {
        if (Job* job = worker->current.load()) job->cancelled = true;
      }
    }
    queue_ready.notify_all();
    for (auto& worker : workers) {
      if (worker->thread.joinable()) worker->thread.join();
    }
    for (auto& job : queue) job->done(Error{"edge_llm_stopped", "the edge LLM engine stopped"});
    LlmMetrics::get().queue_depth.set(0);
    for (auto& worker : workers) {
      for (llama_context* context : worker->contexts) llama_free(context);
      if (worker->threadpool != nullptr) ggml_threadpool_free(worker->threadpool);
    }
    for (llama_model* merged : merged_models) llama_model_free(merged);
    if (model != nullptr) llama_model_free(model);
  }

  static bool abort_check(void* data) {
    Job* job = static_cast<Worker*>(data)->current.load(std::memory_order_relaxed);
    return job != nullptr && job->should_stop();
  }

  Status submit(std::shared_ptr<Job> job) {
    {
      std::lock_guard lock(queue_mutex);
      if (stopping) return Error{"edge_llm_stopped", "the edge LLM engine stopped"};
      // An idle worker takes the job at once; beyond those, max_queue may wait.
      const int idle = static_cast<int>(workers.size()) - running;
      if (static_cast<int>(queue.size()) >= config.max_queue + idle) {
        return Error{"edge_llm_busy",
                     "edge LLM queue is full (" + std::to_string(config.max_queue) + " waiting)"};
      }
      queue.push_back(std::move(job));
      LlmMetrics::get().queue_depth.set(static_cast<double>(queue.size()));
    }
    queue_ready.notify_one();
    return Ok{};
  }

  void worker_loop(Worker& worker) {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        std::unique_lock lock(queue_mutex);
        queue_ready.wait(lock, [&] { return stopping || !queue.empty(); });
        if (stopping) return;
        job = std::move(queue.front());
        queue.pop_front();
        LlmMetrics::get().queue_depth.set(static_cast<double>(queue.size()));
        worker.current = job.get();
        ++running;
      }
      auto result = run(worker, *job);
      {
        std::lock_guard lock(queue_mutex);
        worker.current = nullptr;
        --running;
      }
      job->done(std::move(result));
    }
  }

  std::string token_piece(llama_token token) const {
    char buffer[128];
    int n = llama_token_to_piece(vocab, token, buffer, sizeof buffer, 0, /*special=*/false);
    if (n >= 0) return std::string(buffer, static_cast<std::size_t>(n));
    std::string piece(static_cast<std::size_t>(-n), '\0');
    n = llama_token_to_piece(vocab, token, piece.data(), -n, 0, false);
    piece.resize(static_cast<std::size_t>(std::max(n, 0)));
    return piece;
  }

  // Points the worker at the context for the named adapter (or the base): a merged adapter's
  // own context, else the base's with the adapter set on it (a no-op when it already is).
  Status apply_adapter(Worker& worker, const std::string& name) {
    const Adapter* wanted = nullptr;
    if (!name.empty()) {
      for (const auto& adapter : adapters) {
        if (adapter.name == name) wanted = &adapter;
      }
      if (wanted == nullptr) {
        return Error{"adapter_unknown", "no edge LLM adapter named \"" + name + "\""};
      }
    }
    if (wanted != nullptr && wanted->lora == nullptr) {
      worker.context = worker.contexts[wanted->context];
      return Ok{};
    }
    worker.context = worker.contexts[0];
    if ((wanted == nullptr ? nullptr : &wanted->name) == worker.adapter) return Ok{};
    llama_adapter_lora* lora = wanted == nullptr ? nullptr : wanted->lora;
    float scale = wanted == nullptr ? 0.0f : wanted->scale;
    if (llama_set_adapters_lora(worker.context, wanted == nullptr ? nullptr : &lora,
                                wanted == nullptr ? 0 : 1, &scale) != 0) {
      return Error{"decode_failed", "cannot set the edge LLM adapter \"" + name + "\""};
    }
    worker.adapter = wanted == nullptr ? nullptr : &wanted->name;
    return Ok{};
  }

  Result<Generation> run(Worker& worker, Job& job) {
    const auto started = Clock::now();
    const GenerationRequest& request = job.request;
    Generation generation;
    generation.queued = duration_cast<microseconds>(started - job.submitted);
    auto stopped_reason = [&job] {
      return job.cancel_requested() ? FinishReason::cancelled : FinishReason::deadline;
    };
    if (job.should_stop()) {
      generation.finish_reason = stopped_reason();
      return generation;
    }

    auto prompt = chat.tokenize(chat.render(request.messages));
    const int context = static_cast<int>(llama_n_ctx(worker.context));
    generation.prompt_tokens = static_cast<int>(prompt.size());
    if (prompt.empty()) return Error{"prompt_empty", "the edge prompt tokenised to nothing"};
    if (generation.prompt_tokens >= context) {
      return Error{"prompt_too_long", "edge prompt is " + std::to_string(prompt.size()) +
                                          " tokens; the context holds " + std::to_string(context)};
    }
    const int wanted = request.max_tokens > 0 ? request.max_tokens : config.max_tokens;
    const int max_new = std::max(1, std::min(wanted, context - generation.prompt_tokens));

    if (auto applied = apply_adapter(worker, request.adapter); !applied) return applied.error();
    llama_memory_clear(llama_get_memory(worker.context), /*data=*/false);
    const int batch = static_cast<int>(llama_n_batch(worker.context));
    for (int at = 0; at < generation.prompt_tokens; at += batch) {
      const int n = std::min(batch, generation.prompt_tokens - at);
      const int rc = llama_decode(worker.context, llama_batch_get_one(prompt.data() + at, n));
      if (rc == 2 || job.should_stop()) {
        generation.finish_reason = stopped_reason();
        return generation;
      }
      if (rc != 0) {
        return Error{"decode_failed",
                     "llama_decode failed on the prompt (" + std::to_string(rc) + ")"};
      }
    }
    const auto prompt_done = Clock::now();
    generation.prompt_eval = duration_cast<microseconds>(prompt_done - started);

    StopFilter filter(request.stop);
    ConfidenceAccumulator confidence;
    std::mt19937_64 rng(request.seed);
    std::vector<std::pair<float, llama_token>> scratch;
    bool sink_open = true;
    auto emit = [&](const std::string& text) {
      if (text.empty()) return;
      if (generation.first_piece.count() == 0) {
        generation.first_piece = duration_cast<microseconds>(Clock::now() - job.submitted);
      }
      if (sink_open && job.emit && !job.emit(text)) {
        sink_open = false;
        job.cancelled = true;
      }
    };

    for (;;) {
      const float* logits = llama_get_logits_ith(worker.context, -1);
      llama_token token = 0;
      if (logits == nullptr) return Error{"decode_failed", "llama.cpp returned no logits"};
      Sampled sampled = sample_token(logits, vocab_size, request, rng, scratch);
      if (std::isnan(logits[sampled.token])) {
        // A broken model or adapter (an overflow in its weights or activations): an error the
        // chain falls back on, not a stream of token 0.
        return Error{"decode_failed", "the model produced NaN logits (a broken model or adapter)"};
      }
      token = sampled.token;
      confidence.add(sampled.logprob);
      if (llama_vocab_is_eog(vocab, token)) {
        generation.finish_reason = FinishReason::stop;
        break;
      }
      ++generation.completion_tokens;
      emit(filter.append(token_piece(token)));
      if (filter.stopped()) {
        generation.finish_reason = FinishReason::stop;
        break;
      }
      if (generation.completion_tokens >= max_new) {
        generation.finish_reason = FinishReason::length;
        break;
      }
      if (job.should_stop()) {
        generation.finish_reason = stopped_reason();
        break;
      }
      const auto decode_start = Clock::now();
      const int rc = llama_decode(worker.context, llama_batch_get_one(&token, 1));
      generation.decode += duration_cast<microseconds>(Clock::now() - decode_start);
      if (rc == 2) {
        generation.finish_reason = stopped_reason();
        break;
      }
      if (rc != 0) {
        return Error{"decode_failed", "llama_decode failed (" + std::to_string(rc) + ")"};
      }
    }
    emit(filter.finish());

    const auto finished = Clock::now();
    generation.text = filter.emitted();
    generation.confidence = confidence.result();
    generation.generation = duration_cast<microseconds>(finished - prompt_done);
    auto& metrics = LlmMetrics::get();
    metrics.prompt_tokens.inc(generation.prompt_tokens);
    metrics.completion_tokens.inc(generation.completion_tokens);
    metrics.generation_seconds.observe(std::chrono::duration<double>(finished - started).count());
    return generation;
  }
};

std::string_view to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop:
      return "stop";
    case FinishReason::length:
      return "length";
    case FinishReason::cancelled:
      return "cancelled";
    case FinishReason::deadline:
      return "deadline";
  }
  return "stop";
}

Status LlmConfig::validate() const {
  auto bad = [](const std::string& field, const std::string& why) {
    return Error{"config_invalid", "edge.llm." + field + ": " + why};
  };
  if (model_path.empty()) return bad("model_path", "is empty");
  for (const auto& adapter : adapters) {
    if (adapter.name.empty()) return bad("adapters", "an adapter needs a name");
    if (adapter.path.empty()) return bad("adapters." + adapter.name, "path is empty");
    if (!(adapter.scale >= 0.0f)) return bad("adapters." + adapter.name, "scale must be >= 0");
  }
  if (threads < 0) return bad("threads", "must be >= 0");
  if (context_tokens < 0) return bad("context_tokens", "must be >= 0");
  if (max_tokens < 1) return bad("max_tokens", "must be >= 1");
  if (workers < 1) return bad("workers", "must be >= 1");
  if (max_queue < 0) return bad("max_queue", "must be >= 0");
  if (summary_turns < 1) return bad("summary_turns", "must be >= 1");
  if (summary_chars < 1) return bad("summary_chars", "must be >= 1");
  return Ok{};
}

Result<std::unique_ptr<LlmEngine>> LlmEngine::load(const LlmConfig& config) {
  if (auto valid = config.validate(); !valid) return valid.error();
  init_llama_once();
  const std::string& path = config.model_path;

  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return Error{"model_not_found", "edge LLM model file not found: " + path};
  }

  // Read the header first: a clear "not a GGUF" beats a loader stack of messages.
  std::string architecture;
  {
    LlamaLogCapture capture;
    gguf_context* header = gguf_init_from_file(path.c_str(), {/*no_alloc=*/true, nullptr});
    if (header == nullptr) {
      return Error{"model_corrupt", "edge LLM model " + path +
                                        " is not a valid GGUF file (bad magic, truncated or "
                                        "corrupt)" +
                                        (capture.text().empty() ? "" : ": " + capture.text())};
    }
    const std::int64_t key = gguf_find_key(header, "general.architecture");
    if (key >= 0 && gguf_get_kv_type(header, key) == GGUF_TYPE_STRING) {
      architecture = gguf_get_val_str(header, key);
    }
    gguf_free(header);
  }
  if (architecture.empty()) {
    return Error{"model_corrupt", "edge LLM model " + path + " has no general.architecture"};
  }

  auto impl = std::make_unique<Impl>();
  impl->config = config;
  {
    LlamaLogCapture capture;
    llama_model_params params = llama_model_default_params();
    params.n_gpu_layers = 0;
    impl->model = llama_model_load_from_file(path.c_str(), params);
    if (impl->model == nullptr) {
      if (capture.text().find("unknown model architecture") != std::string::npos) {
        return Error{"model_unsupported_architecture",
                     "edge LLM model " + path + ": architecture '" + architecture +
                         "' is not supported by the built-in llama.cpp"};
      }
      return Error{"model_load_failed",
                   "cannot load edge LLM model " + path + " (architecture '" + architecture +
                       "'): " + (capture.text().empty() ? "unknown error" : capture.text())};
    }
  }
  impl->vocab = llama_model_get_vocab(impl->model);
  impl->vocab_size = llama_vocab_n_tokens(impl->vocab);

  char desc[256] = {};
  llama_model_desc(impl->model, desc, sizeof desc);
  impl->description = std::string(desc) + " (" + file_name(path) + ")";

  // Chat template: the model's own when llama.cpp knows it, else ChatML when the vocabulary has
  // its special tokens, else a plain transcript.
  impl->chat = ChatFormat::for_model(impl->model);
  if (!impl->chat.uses_model_template()) {
    spdlog::info("edge LLM {}: {} chat template", file_name(path), impl->chat.source());
  }

  for (const auto& adapter : config.adapters) {
    LlamaLogCapture capture;
    llama_adapter_lora* lora = llama_adapter_lora_init(impl->model, adapter.path.c_str());
    if (lora == nullptr) {
      return Error{"adapter_load_failed", "cannot load edge LLM adapter \"" + adapter.name +
                                              "\" from " + adapter.path + " for " + path + ": " +
                                              (capture.text().empty() ? "unknown error" : capture.text())};
    }
    if (!config.merge_adapters) {
      impl->adapters.push_back({adapter.name, lora, adapter.scale});
      continue;
    }
    // Checked by llama.cpp above (names and shapes against this base), then folded into a copy:
    // the adapter itself is not needed past the check.
    llama_adapter_lora_free(lora);
    auto merged = load_merged(path, adapter);
    if (!merged) return merged.error();
    impl->merged_models.push_back(*merged);
    impl->adapters.push_back({adapter.name, nullptr, adapter.scale, impl->merged_models.size()});
  }

  const int train_context = llama_model_n_ctx_train(impl->model);
  impl->context_tokens =
      config.context_tokens > 0 ? std::min(config.context_tokens, train_context) : train_context;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  impl->threads = config.threads > 0 ? config.threads : std::max(1, cores / config.workers);

  for (int i = 0; i < config.workers; ++i) {
    auto worker = std::make_unique<Impl::Worker>();
    worker->engine = impl.get();
    llama_context_params params = llama_context_default_params();
    params.n_ctx = static_cast<std::uint32_t>(impl->context_tokens);
    params.n_batch = static_cast<std::uint32_t>(std::min(impl->context_tokens, 512));
    params.n_ubatch = params.n_batch;
    params.n_seq_max = 1;
    params.n_threads = impl->threads;
    params.n_threads_batch = impl->threads;
    params.no_perf = true;
    params.abort_callback = &Impl::abort_check;
    params.abort_callback_data = worker.get();
    ggml_threadpool_params pool_params = ggml_threadpool_params_default(impl->threads);
    worker->threadpool = ggml_threadpool_new(&pool_params);
    if (worker->threadpool == nullptr) {
      return Error{"context_failed", "cannot create " + std::to_string(impl->threads) +
                                         " compute threads for " + path};
    }
    // Pushed before anything can fail, so ~Impl frees what was made.
    Impl::Worker* made = worker.get();
    impl->workers.push_back(std::move(worker));
    std::vector<llama_model*> models = {impl->model};
    models.insert(models.end(), impl->merged_models.begin(), impl->merged_models.end());
    for (llama_model* model : models) {
      LlamaLogCapture capture;
      llama_context* context = llama_init_from_model(model, params);
      if (context == nullptr) {
        return Error{"context_failed", "cannot create a llama context for " + path + " (" +
                                           std::to_string(impl->context_tokens) +
                                           " tokens): " + capture.text()};
      }
      llama_attach_threadpool(context, made->threadpool, nullptr);
      made->contexts.push_back(context);
    }
    made->context = made->contexts[0];
  }
  for (auto& worker : impl->workers) {
    Impl* engine = impl.get();
    Impl::Worker* w = worker.get();
    worker->thread = std::thread([engine, w] { engine->worker_loop(*w); });
  }
  spdlog::info("edge LLM loaded: {}, context {} tokens, {} worker(s) x {} thread(s), template {}",
               impl->description, impl->context_tokens, config.workers, impl->threads,
               impl->chat.source());
  return std::unique_ptr<LlmEngine>(new LlmEngine(std::move(impl)));
}

LlmEngine::LlmEngine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LlmEngine::~LlmEngine() = default;

awaitable<Result<Generation>> LlmEngine::generate(GenerationRequest request, PieceSink on_piece,
                                                  CancelToken cancel) {
  auto channel = std::make_shared<PieceChannel>();
  auto job = std::make_shared<Job>();
  job->request = std::move(request);
  job->emit = [channel](std::string_view piece) {
    channel->push(std::string(piece));
    return true;
  };
  job->done = [channel](Result<Generation> result) { channel->finish(std::move(result)); };
  auto registration = cancel.on_cancel([job] { job->cancelled = true; });
  if (auto submitted = impl_->submit(job); !submitted) co_return submitted.error();

  for (;;) {
    co_await channel->async_wait(use_awaitable);
    auto batch = channel->take();
    for (auto& piece : batch.pieces) {
      if (!on_piece || job->cancelled.load()) continue;
      if (!co_await on_piece(piece)) job->cancelled = true;
    }
    if (batch.result) co_return std::move(*batch.result);
  }
}

Result<Generation> LlmEngine::generate_blocking(const GenerationRequest& request,
                                                const BlockingPieceSink& on_piece,
                                                std::stop_token stop) {
  auto job = std::make_shared<Job>();
  job->request = request;
  job->emit = on_piece;
  job->stop = std::move(stop);
  std::promise<Result<Generation>> promise;
  auto future = promise.get_future();
  job->done = [&promise](Result<Generation> result) { promise.set_value(std::move(result)); };
  if (auto submitted = impl_->submit(job); !submitted) return submitted.error();
  return future.get();
}

std::vector<ChatMessage> LlmEngine::edge_messages(
    const std::vector<ChatMessage>& conversation) const {
  EdgePromptOptions options;
  options.summary_turns = impl_->config.summary_turns;
  options.earlier_turn_chars = static_cast<std::size_t>(impl_->config.summary_chars);
  return build_edge_messages(conversation, options);
}

std::string LlmEngine::format_prompt(const std::vector<ChatMessage>& messages) const {
  return impl_->chat.render(messages);
}

std::vector<std::int32_t> LlmEngine::tokenize(std::string_view text) const {
  return impl_->chat.tokenize(text);
}

bool LlmEngine::has_adapter(const std::string& name) const {
  return std::any_of(impl_->adapters.begin(), impl_->adapters.end(),
                     [&name](const auto& adapter) { return adapter.name == name; });
}

std::string LlmEngine::model_label(const std::string& adapter) const {
  std::string label = file_name(impl_->config.model_path);
  if (!impl_->config.model_version.empty()) label += "@" + impl_->config.model_version;
  for (const auto& configured : impl_->config.adapters) {
    if (configured.name == adapter) {
      label += "+" + adapter + (configured.version.empty() ? "" : "@" + configured.version);
    }
  }
  return label;
}

const LlmConfig& LlmEngine::config() const { return impl_->config; }
const std::string& LlmEngine::model_description() const { return impl_->description; }
const std::string& LlmEngine::chat_template_source() const { return impl_->chat.source(); }
int LlmEngine::context_tokens() const { return impl_->context_tokens; }
int LlmEngine::threads() const { return impl_->threads; }
int LlmEngine::queue_depth() const {
  std::lock_guard lock(impl_->queue_mutex);
  return static_cast<int>(impl_->queue.size());
}

}  // namespace hengshi::edge
