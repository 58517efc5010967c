// `hengshi finetune`: fine-tunes a GGUF model on chat rows with llama.cpp's own trainer
// (llama_opt_init / llama_opt_epoch; FP32 on the CPU) and writes a versioned directory:
//   manifest.json  format hengshi-edge-llm: files with xxh64 hashes, the base model's and the
//                  data's hashes, the hyper-parameters, per-epoch losses and the answer scores
//   model.gguf     the fine-tuned model (--output full), quantised (Q8_0 by default)
//   adapter.gguf   or the LoRA adapter (--output lora): the rank-r SVD of each trained matrix's
//                  change, which llama_adapter_lora_init loads over the same base
// Rows are rendered with the model's chat template (the engine's ChatFormat, so training sees the
// text serving sees) and only the answer's tokens carry loss. Same base + data + options + seed
// = the same files. The directory is staged and renamed into place.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "edge/llm_answer_run.h"

namespace hengshi::edge {

struct FinetuneOptions {
  std::string base_model;  // GGUF; any type llama_model_quantize can turn into F32
  std::string data_path;   // JSON Lines (finetune_data.h)
  std::string out_dir;
  std::string output = "lora";  // "lora" or "full"
  int lora_rank = 8;
  std::string quantization = "q8_0";  // full output: q8_0, f16 or f32
  int epochs = 3;
  float learning_rate = 1e-4f;  // AdamW; decays exponentially to learning_rate × lr_min_ratio
  float lr_min_ratio = 0.05f;
  double heldout_share = 0.1;  // per answer, never a group's last row (split_heldout)
  // Several rows per training window (finetune_windows.h): faster, but a row can copy the answer
  // of the row before it rather than learn to answer its question.
  bool pack_rows = false;
  std::uint64_t seed = 1;
  int threads = 0;  // 0 = all cores
  // Answer scores (char F1 of greedy answers, before and after) on at most this many training
  // and held-out rows each; 0 skips them.
  int eval_rows = 32;
};

struct FinetuneEpoch {
  int epoch = 0;  // 1-based
  double learning_rate = 0;
  double train_loss = 0;    // mean cross-entropy per answer token, nats
  double heldout_loss = 0;  // same on the held-out rows; NaN without any
  double seconds = 0;
};

struct FinetuneReport {
  std::string out_dir;
  std::string model_file;  // model.gguf or adapter.gguf
  std::string version;     // "<UTC>-<8 hex of the file's xxh64>"
  std::size_t train_rows = 0, heldout_rows = 0, skipped_rows = 0;
  std::size_t window = 0, train_windows = 0, answer_tokens = 0;
  std::vector<FinetuneEpoch> epochs;
  double seconds_per_epoch = 0;
  double lora_worst_relative_error = 0;  // LoRA output: ||Δ - B·A|| / ||Δ||, worst matrix
  AnswerScores train_before, train_after, heldout_before, heldout_after;
  struct Sample {
    std::string question, expected, before, after;
  };
  std::vector<Sample> samples;  // the first few held-out (else training) rows
};

using FinetuneProgress = std::function<void(const FinetuneEpoch&)>;

// Errors: invalid_argument (options), data_invalid (rows), model_load_failed, finetune_failed,
// lora_export_failed, io_error — each naming the file or row.
Result<FinetuneReport> finetune(const FinetuneOptions& options, const FinetuneProgress& progress = {});

}  // namespace hengshi::edge
