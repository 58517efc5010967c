#include "edge/llm_finetune.h"

#include <ggml-opt.h>
#include <gguf.h>
#include <llama.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <thread>

#include "edge/finetune_data.h"
#include "edge/finetune_windows.h"
#include "edge/llm_chat_format.h"
#include "edge/llm_engine.h"
#include "edge/llm_lora_export.h"
#include "edge/llm_runtime.h"
#include "edge/model_manifest.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// llama.cpp pads a context to multiples of 256 tokens, and its trainer needs the window to be
// the context: windows are multiples of 256.
constexpr std::size_t kWindowStep = 256;

Error invalid(const std::string& why) { return Error{"invalid_argument", why}; }
Error failed(const std::string& why) { return Error{"finetune_failed", why}; }

Status validate(const FinetuneOptions& o) {
  if (o.base_model.empty()) return invalid("--base is required");
  if (o.data_path.empty()) return invalid("--data is required");
  if (o.out_dir.empty()) return invalid("--out is required");
  if (o.output != "lora" && o.output != "full") return invalid("--output must be lora or full");
  if (o.output == "lora" && o.lora_rank < 1) return invalid("--rank must be >= 1");
  if (o.quantization != "q8_0" && o.quantization != "f16" && o.quantization != "f32") {
    return invalid("--quant must be q8_0, f16 or f32");
  }
  if (o.epochs < 1) return invalid("--epochs must be >= 1");
  if (!(o.learning_rate > 0.0f)) return invalid("--lr must be > 0");
  if (!(o.lr_min_ratio > 0.0f && o.lr_min_ratio <= 1.0f)) return invalid("--lr-min-ratio must be in (0, 1]");
  if (!(o.heldout_share >= 0.0 && o.heldout_share <= 0.5)) return invalid("--heldout must be in [0, 0.5]");
  if (o.eval_rows < 0) return invalid("--eval-rows must be >= 0");
  return Ok{};
}

struct ModelDeleter {
  void operator()(llama_model* m) const { llama_model_free(m); }
};
struct ContextDeleter {
  void operator()(llama_context* c) const { llama_free(c); }
};
struct DatasetDeleter {
  void operator()(ggml_opt_dataset* d) const { ggml_opt_dataset_free(d); }
};
struct ResultDeleter {
  void operator()(ggml_opt_result* r) const { ggml_opt_result_free(r); }
};

int thread_count(int wanted) {
  return wanted > 0 ? wanted : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

Status quantize(const std::string& in, const std::string& out, llama_ftype type, int threads,
                std::int64_t context_length = 0, const std::string& architecture = {}) {
  llama_model_quantize_params params = llama_model_quantize_default_params();
  params.nthread = threads;
  params.ftype = type;
  params.allow_requantize = true;
  std::vector<llama_model_kv_override> overrides;
  if (context_length > 0 && !architecture.empty()) {
    // The trainer sets the model's training context to its window; the served model keeps the
    // base's.
    llama_model_kv_override context{};
    context.tag = LLAMA_KV_OVERRIDE_TYPE_INT;
    std::snprintf(context.key, sizeof context.key, "%s.context_length", architecture.c_str());
    context.val_i64 = context_length;
    overrides.push_back(context);
    overrides.push_back(llama_model_kv_override{});  // key "" ends the list
    params.kv_overrides = overrides.data();
  }
  LlamaLogCapture capture;
  if (llama_model_quantize(in.c_str(), out.c_str(), &params) != 0) {
    return Error{"model_load_failed", "cannot convert " + in + ": " + capture.text()};
  }
  return Ok{};
}

// The base's architecture and training context, read from its header, and whether every tensor
// is F32 (a base whose matrices are not).
Status read_header(const std::string& path, std::string& architecture, std::int64_t& context, bool& all_f32) {
  gguf_context* header = gguf_init_from_file(path.c_str(), {/*no_alloc=*/true, nullptr});
  if (header == nullptr) return Error{"model_load_failed", path + " is not a readable GGUF file"};
  all_f32 = true;
  for (std::int64_t i = 0; i < gguf_get_n_tensors(header); ++i) {
    if (gguf_get_tensor_type(header, i) != GGML_TYPE_F32) all_f32 = false;
  }
  const std::int64_t arch_key = gguf_find_key(header, "general.architecture");
  if (arch_key >= 0) architecture = gguf_get_val_str(header, arch_key);
  const std::int64_t ctx_key = gguf_find_key(header, (architecture + ".context_length").c_str());
  context = ctx_key >= 0 ? static_cast<std::int64_t>(gguf_get_val_u32(header, ctx_key)) : 0;
  gguf_free(header);
  if (architecture.empty()) return Error{"model_load_failed", path + " has no general.architecture"};
  return Ok{};
}

// llama.cpp's model saver writes the hyper-parameters and tokenizer but not every key of the
// base (the chat template among them): the full output gets the base's missing keys back, so it
// renders prompts as the base did.
Status restore_missing_metadata(const std::string& base_path, const std::string& model_path) {
  gguf_context* base = gguf_init_from_file(base_path.c_str(), {/*no_alloc=*/true, nullptr});
  if (base == nullptr) return failed("cannot read " + base_path);
  ggml_context* data = nullptr;
  gguf_context* model = gguf_init_from_file(model_path.c_str(), {/*no_alloc=*/false, &data});
  if (model == nullptr) {
    gguf_free(base);
    return failed("cannot read " + model_path);
  }
  int added = 0;
  for (std::int64_t k = 0; k < gguf_get_n_kv(base); ++k) {
    const char* key = gguf_get_key(base, k);
    if (gguf_find_key(model, key) >= 0) continue;
    const gguf_type type = gguf_get_kv_type(base, k);
    if (type == GGUF_TYPE_STRING) {
      gguf_set_val_str(model, key, gguf_get_val_str(base, k));
      ++added;
    }
  }
  Status written = Ok{};
  if (added > 0) {
    // Tensors are re-added from the loaded context so the data is written with the new header.
    gguf_context* out = gguf_init_empty();
    gguf_set_kv(out, model);
    for (std::int64_t t = 0; t < gguf_get_n_tensors(model); ++t) {
      gguf_add_tensor(out, ggml_get_tensor(data, gguf_get_tensor_name(model, t)));
    }
    const std::string temporary = model_path + ".meta";
    if (!gguf_write_to_file(out, temporary.c_str(), /*only_meta=*/false)) {
      written = failed("cannot write " + temporary);
    } else {
      std::error_code ec;
      fs::rename(temporary, model_path, ec);
      if (ec) written = failed("cannot write " + model_path + ": " + ec.message());
    }
    gguf_free(out);
  }
  gguf_free(model);
  gguf_free(base);
  ggml_free(data);
  return written;
}

struct LearningRate {
  float current = 0;
};
ggml_opt_optimizer_params optimizer_params(void* data) {
  ggml_opt_optimizer_params params = ggml_opt_get_default_optimizer_params(nullptr);
  params.adamw.alpha = static_cast<const LearningRate*>(data)->current;
  params.adamw.wd = 0.0f;
  return params;
}
// LoRA output: only matrices train, so the adapter (matrices only) carries the whole change.
bool matrices_only(const ggml_tensor* tensor, void*) { return ggml_n_dims(tensor) == 2; }

// Mean cross-entropy per answer token: ggml averages over every position of a window, masked
// ones included (they add 0).
double per_answer_token(ggml_opt_result_t result, std::size_t positions, std::size_t labelled) {
  std::int64_t batches = 0;
  ggml_opt_result_ndata(result, &batches);
  if (labelled == 0 || batches == 0) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  double loss = 0;
  double uncertainty = 0;
  ggml_opt_result_loss(result, &loss, &uncertainty);
  return loss * static_cast<double>(positions) / static_cast<double>(labelled);
}

std::vector<FinetuneRow> first_rows(const std::vector<FinetuneRow>& rows, int count) {
  return {rows.begin(), rows.begin() + std::min<std::ptrdiff_t>(count, std::ssize(rows))};
}

nlohmann::json scores_json(const AnswerScores& s) {
  return {{"rows", s.rows}, {"char_f1", s.mean_f1}, {"exact", s.exact}};
}

}  // namespace

Result<FinetuneReport> finetune(const FinetuneOptions& options, const FinetuneProgress& progress) {
  if (auto valid = validate(options); !valid) return valid.error();
  init_llama_once();
  const int threads = thread_count(options.threads);
  FinetuneReport report;

  auto data = read_finetune_rows(options.data_path);
  if (!data) return data.error();
  report.skipped_rows = data->skipped_without_answer;
  FinetuneSplit split = split_heldout(data->rows, options.heldout_share, options.seed);
  report.train_rows = split.train.size();
  report.heldout_rows = split.heldout.size();

  std::string architecture;
  std::int64_t base_context = 0;
  bool base_all_f32 = true;
  if (auto s = read_header(options.base_model, architecture, base_context, base_all_f32); !s) return s.error();

  const fs::path target = fs::absolute(options.out_dir);
  if (std::error_code ec; fs::exists(target, ec) && !fs::exists(target / kManifestFileName, ec) &&
                          !(fs::is_directory(target, ec) && fs::is_empty(target, ec))) {
    return invalid(target.string() + " exists and is not a model directory; refusing to replace it");
  }
  StagingDirectory staging(target);
  if (auto s = staging.create(); !s) return s.error();
  const std::string base_f32 = (staging.path() / "base-f32.gguf").string();
  const std::string tuned_f32 = (staging.path() / "tuned-f32.gguf").string();

  // The trainer needs F32 weights it can write: convert (a copy when the base is F32 already).
  if (auto s = quantize(options.base_model, base_f32, LLAMA_FTYPE_ALL_F32, threads); !s) {
    return s.error();
  }
  std::unique_ptr<llama_model, ModelDeleter> model;
  {
    LlamaLogCapture capture;
    llama_model_params params = llama_model_default_params();
    params.n_gpu_layers = 0;
    params.load_mode = LLAMA_LOAD_MODE_NONE;  // writable weights, not a read-only mapping
    model.reset(llama_model_load_from_file(base_f32.c_str(), params));
    if (!model) {
      return Error{"model_load_failed", "cannot load " + options.base_model + ": " + capture.text()};
    }
  }
  const ChatFormat chat = ChatFormat::for_model(model.get());

  // Rows → tokens: the prompt as the engine renders it, then the rest of the conversation (the
  // answer and the template's end of turn), whose tokens carry the loss.
  auto tokenize_rows = [&](const std::vector<FinetuneRow>& rows)
      -> Result<std::vector<TokenizedRow>> {
    std::vector<TokenizedRow> out;
    for (const auto& row : rows) {
      const std::string prompt = chat.render(row.prompt(), /*add_generation_prompt=*/true);
      const std::string full = chat.render(row.messages, /*add_generation_prompt=*/false);
      if (full.size() <= prompt.size() || full.compare(0, prompt.size(), prompt) != 0) {
        return Error{"data_invalid", options.data_path + ":" + std::to_string(row.line) +
                                         ": the chat template does not render the prompt as the "
                                         "start of the conversation; cannot mark the answer"};
      }
      TokenizedRow tokenized;
      tokenized.tokens = chat.tokenize(prompt);
      tokenized.prompt_tokens = tokenized.tokens.size();
      const auto answer = chat.tokenize_continuation(std::string_view(full).substr(prompt.size()));
      tokenized.tokens.insert(tokenized.tokens.end(), answer.begin(), answer.end());
      out.push_back(std::move(tokenized));
    }
    return out;
  };
  auto train_tokens = tokenize_rows(split.train);
  if (!train_tokens) return train_tokens.error();
  auto heldout_tokens = tokenize_rows(split.heldout);
  if (!heldout_tokens) return heldout_tokens.error();
  std::size_t longest = 0;
  std::size_t longest_answer = 0;
  for (const auto* set : {&*train_tokens, &*heldout_tokens}) {
    for (const auto& row : *set) {
      longest = std::max(longest, row.tokens.size());
      longest_answer = std::max(longest_answer, row.tokens.size() - row.prompt_tokens);
    }
  }
  const std::size_t window = (longest + kWindowStep - 1) / kWindowStep * kWindowStep;
  if (base_context > 0 && window > static_cast<std::size_t>(std::max<std::int64_t>(base_context, kWindowStep))) {
    return invalid("the longest row is " + std::to_string(longest) + " tokens; " +
                   options.base_model + " was trained on " + std::to_string(base_context));
  }
  const llama_token pad = std::max(llama_vocab_eos(llama_model_get_vocab(model.get())), 0);
  auto train_windows = pack_windows(*train_tokens, window, pad, options.pack_rows);
  if (!train_windows) return train_windows.error();
  auto heldout_windows = pack_windows(*heldout_tokens, window, pad, options.pack_rows);
  if (!heldout_windows) return heldout_windows.error();
  report.window = window;
  report.train_windows = train_windows->count;
  report.answer_tokens = train_windows->label_positions;

  std::unique_ptr<llama_context, ContextDeleter> context;
  {
    LlamaLogCapture capture;
    llama_context_params params = llama_context_default_params();
    params.n_ctx = static_cast<std::uint32_t>(window);
    params.n_batch = params.n_ctx;
    params.n_ubatch = params.n_ctx;
    params.n_threads = threads;
    params.n_threads_batch = threads;
    params.type_k = GGML_TYPE_F32;  // the backward pass has no F16 OUT_PROD
    params.type_v = GGML_TYPE_F32;
    params.no_perf = true;
    context.reset(llama_init_from_model(model.get(), params));
    if (!context) return failed("cannot create a training context: " + capture.text());
  }
  // The trainer computes on the context's scheduler without setting the CPU backend's thread
  // count, which then stays at ggml's default of 4: on 2 cores the threads spin in barriers
  // (3× slower, measured). One decode sets it.
  {
    std::vector<llama_token> warm = {train_windows->tokens[0], train_windows->tokens[1]};
    llama_decode(context.get(), llama_batch_get_one(warm.data(), 2));
    llama_memory_clear(llama_get_memory(context.get()), true);
  }

  LearningRate rate;
  llama_opt_params opt{};
  opt.n_ctx_train = 0;  // the context's: the window
  opt.param_filter = options.output == "lora" ? &matrices_only : &llama_opt_param_filter_all;
  opt.param_filter_ud = nullptr;
  opt.get_opt_pars = &optimizer_params;
  opt.get_opt_pars_ud = &rate;
  opt.optimizer_type = GGML_OPT_OPTIMIZER_TYPE_ADAMW;
  llama_opt_init(context.get(), model.get(), opt);

  const auto total_windows = static_cast<std::int64_t>(train_windows->count + heldout_windows->count);
  std::unique_ptr<ggml_opt_dataset, DatasetDeleter> dataset(ggml_opt_dataset_init(
      GGML_TYPE_I32, GGML_TYPE_I32, static_cast<std::int64_t>(window),
      static_cast<std::int64_t>(window), total_windows, /*ndata_shard=*/1));
  auto* dataset_tokens = static_cast<std::int32_t*>(ggml_opt_dataset_data(dataset.get())->data);
  auto* dataset_labels = static_cast<std::int32_t*>(ggml_opt_dataset_labels(dataset.get())->data);
  const std::size_t train_values = train_windows->tokens.size();
  std::copy(heldout_windows->tokens.begin(), heldout_windows->tokens.end(), dataset_tokens + train_values);
  std::copy(heldout_windows->labels.begin(), heldout_windows->labels.end(), dataset_labels + train_values);

  std::unique_ptr<ggml_opt_result, ResultDeleter> train_result(ggml_opt_result_init());
  std::unique_ptr<ggml_opt_result, ResultDeleter> eval_result(ggml_opt_result_init());
  SeededOrder order(options.seed);
  std::vector<std::size_t> window_order(train_windows->count);
  const auto training_started = Clock::now();
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    const auto started = Clock::now();
    // Training windows in a new seeded order each epoch.
    for (std::size_t i = 0; i < window_order.size(); ++i) window_order[i] = i;
    order.shuffle(window_order);
    for (std::size_t i = 0; i < window_order.size(); ++i) {
      const std::size_t from = window_order[i] * window;
      std::copy_n(train_windows->tokens.begin() + static_cast<std::ptrdiff_t>(from), window, dataset_tokens + i * window);
      std::copy_n(train_windows->labels.begin() + static_cast<std::ptrdiff_t>(from), window, dataset_labels + i * window);
    }
    const double progress_share = options.epochs > 1 ? double(epoch - 1) / (options.epochs - 1) : 0.0;
    rate.current = options.learning_rate * std::pow(options.lr_min_ratio, static_cast<float>(progress_share));
    ggml_opt_result_reset(train_result.get());
    ggml_opt_result_reset(eval_result.get());
    llama_opt_epoch(context.get(), dataset.get(), train_result.get(), eval_result.get(),
                    static_cast<std::int64_t>(train_windows->count), nullptr, nullptr);
    FinetuneEpoch row;
    row.epoch = epoch;
    row.learning_rate = rate.current;
    row.train_loss = per_answer_token(train_result.get(), train_windows->tokens.size(),
                                      train_windows->label_positions);
    row.heldout_loss = per_answer_token(eval_result.get(), heldout_windows->tokens.size(),
                                        heldout_windows->label_positions);
    row.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (!std::isfinite(row.train_loss)) {
      return failed("training diverged at epoch " + std::to_string(epoch) + " (loss is not finite); lower --lr");
    }
    report.epochs.push_back(row);
    if (progress) progress(row);
  }
  report.seconds_per_epoch =
      std::chrono::duration<double>(Clock::now() - training_started).count() / options.epochs;
  context.reset();
  llama_model_save_to_file(model.get(), tuned_f32.c_str());
  model.reset();

  // The output, then the base F32 copy and the tuned one go.
  report.model_file = options.output == "full" ? "model.gguf" : "adapter.gguf";
  const std::string output_path = (staging.path() / report.model_file).string();
  if (options.output == "full") {
    const llama_ftype type = options.quantization == "q8_0" ? LLAMA_FTYPE_MOSTLY_Q8_0
                             : options.quantization == "f16" ? LLAMA_FTYPE_MOSTLY_F16
                                                             : LLAMA_FTYPE_ALL_F32;
    if (auto s = quantize(tuned_f32, output_path, type, threads, base_context, architecture); !s) {
      return s.error();
    }
    if (auto s = restore_missing_metadata(options.base_model, output_path); !s) return s.error();
  } else {
    // F16 factors over a base with F16 or quantised matrices (its activations are F16-safe, as
    // llama.cpp converts them for those matmuls anyway); F32 over an F32 base, whose
    // activations may not be (a random F32 test model's overflowed F16 to NaN).
    auto exported = export_lora_adapter(base_f32, tuned_f32, output_path, options.lora_rank, !base_all_f32);
    if (!exported) return exported.error();
    report.lora_worst_relative_error = exported->worst_relative_error;
  }
  std::error_code ec;
  fs::remove(base_f32, ec);
  fs::remove(tuned_f32, ec);

  // Answer scores before (the base as given) and after (the output as it will be served).
  const int max_tokens = static_cast<int>(longest_answer) + 8;
  if (options.eval_rows > 0) {
    const auto train_sample = first_rows(split.train, options.eval_rows);
    const auto heldout_sample = first_rows(split.heldout, options.eval_rows);
    LlmConfig config;
    config.model_path = options.base_model;
    config.threads = threads;
    // The window holds the longest row: no need for the model's whole (maybe 32k) context.
    config.context_tokens = static_cast<int>(window);
    // Each answer is generated once; the report shows the first held-out rows (paraphrases), or
    // the first training rows when nothing was held out.
    std::vector<std::string> train_before, heldout_before, train_after, heldout_after;
    {
      auto base = LlmEngine::load(config);
      if (!base) return base.error();
      auto train = answer_rows(**base, "", train_sample, max_tokens);
      auto heldout = answer_rows(**base, "", heldout_sample, max_tokens);
      report.train_before = train.scores;
      report.heldout_before = heldout.scores;
      train_before = std::move(train.answers);
      heldout_before = std::move(heldout.answers);
    }
    std::string adapter;
    if (options.output == "full") {
      config.model_path = output_path;
    } else {
      config.adapters = {{"finetune", output_path, 1.0f}};
      adapter = "finetune";
    }
    auto tuned = LlmEngine::load(config);
    if (!tuned) return tuned.error();
    auto train = answer_rows(**tuned, adapter, train_sample, max_tokens);
    auto heldout = answer_rows(**tuned, adapter, heldout_sample, max_tokens);
    report.train_after = train.scores;
    report.heldout_after = heldout.scores;
    train_after = std::move(train.answers);
    heldout_after = std::move(heldout.answers);
    const bool show_heldout = !heldout_sample.empty();
    const auto& shown = show_heldout ? heldout_sample : train_sample;
    const auto& before = show_heldout ? heldout_before : train_before;
    const auto& after = show_heldout ? heldout_after : train_after;
    for (std::size_t i = 0; i < std::min<std::size_t>(3, shown.size()); ++i) {
      report.samples.push_back({shown[i].prompt().back().text, shown[i].answer(), before[i], after[i]});
    }
  }

  ModelManifest manifest;
  manifest.format = std::string(kEdgeLlmFormat);
  manifest.format_version = kEdgeLlmFormatVersion;
  manifest.created_at = utc_timestamp(false);
  manifest.model_file = report.model_file;
  auto file = describe_file(staging.path(), report.model_file);
  if (!file) return file.error();
  manifest.files.push_back(*file);
  manifest.model_version = utc_timestamp(true) + "-" + file->xxh64.substr(0, 8);
  report.version = manifest.model_version;
  auto base_file = describe_path(options.base_model);
  if (!base_file) return base_file.error();
  auto data_file = describe_path(options.data_path);
  if (!data_file) return data_file.error();
  nlohmann::json epochs = nlohmann::json::array();
  for (const auto& e : report.epochs) {
    epochs.push_back({{"epoch", e.epoch}, {"learning_rate", e.learning_rate},
                      {"train_loss", e.train_loss},
                      {"heldout_loss", std::isfinite(e.heldout_loss) ? nlohmann::json(e.heldout_loss) : nlohmann::json()},
                      {"seconds", e.seconds}});
  }
  manifest.training = {{"kind", options.output},
                       {"base_model", options.base_model},
                       {"base_xxh64", base_file->xxh64},
                       {"base_bytes", base_file->bytes},
                       {"architecture", architecture},
                       {"data_file", options.data_path},
                       {"data_xxh64", data_file->xxh64},
                       {"train_rows", report.train_rows},
                       {"heldout_rows", report.heldout_rows},
                       {"skipped_rows", report.skipped_rows},
                       {"window", report.window},
                       {"answer_tokens", report.answer_tokens},
                       {"epochs", epochs}};
  manifest.hyperparameters = {{"epochs", options.epochs},
                              {"learning_rate", options.learning_rate},
                              {"lr_min_ratio", options.lr_min_ratio},
                              {"pack_rows", options.pack_rows},
                              {"optimizer", "adamw"},
                              {"heldout_share", options.heldout_share},
                              {"seed", options.seed}};
  if (options.output == "lora") {
    manifest.hyperparameters["lora_rank"] = options.lora_rank;
    manifest.hyperparameters["lora_alpha"] = options.lora_rank;
    manifest.training["lora_worst_relative_error"] = report.lora_worst_relative_error;
  } else {
    manifest.hyperparameters["quantization"] = options.quantization;
  }
  manifest.holdout_metrics = {
      {"heldout_loss", report.epochs.empty() || !std::isfinite(report.epochs.back().heldout_loss)
                           ? nlohmann::json()
                           : nlohmann::json(report.epochs.back().heldout_loss)},
      {"train_before", scores_json(report.train_before)},
      {"train_after", scores_json(report.train_after)},
      {"heldout_before", scores_json(report.heldout_before)},
      {"heldout_after", scores_json(report.heldout_after)}};
  if (auto s = write_manifest(staging.path(), manifest); !s) return s.error();
  if (auto s = replace_model_directory(staging.path(), target); !s) return s.error();
  staging.release();
  report.out_dir = target.string();
  return report;
}

}  // namespace hengshi::edge
