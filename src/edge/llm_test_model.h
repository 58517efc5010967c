// make_test_model(): writes a tiny random-weight GGUF model of a real llama.cpp architecture
// (qwen2 or llama) with a real tokenizer copied from a vocabulary GGUF of the llama.cpp tree
// (models/ggml-vocab-*.gguf), so tests and benchmarks run the real load → tokenize → decode →
// logprob → stream path without downloading a model. Its answers are gibberish by design.
//
// The file is a pure function of (vocabulary, options): weights come from a fixed-seed generator
// of our own, so the same inputs give the same bytes on every machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

struct TestModelOptions {
  // "qwen2" (q/k/v biases) or "llama"; any other name is written as-is, which makes a file that
  // llama.cpp refuses — what the unsupported-architecture tests need.
  std::string architecture = "qwen2";
  int layers = 2;
  int embedding = 64;        // n_embd
  int heads = 4;             // n_head; head size = embedding / heads
  int kv_heads = 2;          // n_head_kv (grouped-query attention when < heads)
  int feed_forward = 128;    // n_ff
  int context_length = 256;  // tokens the model claims to support
  bool f16 = true;           // matrices as F16 (norms and biases stay F32)
  std::uint64_t seed = 42;
  // Keep the vocabulary's chat template, or write a ChatML one when it has none; false removes
  // any template so the engine's fallback is exercised.
  bool chat_template = true;
  // Written as <arch>.pooling_type when >= 0 (1 mean, 2 cls, 3 last): an embedding model, as a
  // GGUF conversion of bge / e5 says how its sentence vector is pooled. -1 = not written.
  int pooling = -1;
  // A separate output.weight instead of one tied to token_embd. llama.cpp's trainer cannot
  // train token_embd, so a model meant for `hengshi finetune` needs its own output matrix.
  bool untied_output = false;
  // Cut a BPE vocabulary to the first `vocab_limit` tokens (at least the 256 byte tokens) and
  // every token the full tokenizer uses for the texts of `vocab_corpus`, with the tokens their
  // merges pass through and the special tokens (moved to the end). The corpus then tokenizes
  // exactly as with the whole vocabulary; other text falls back to smaller pieces or bytes. The
  // output layer's cost is linear in the vocabulary: a cut is what makes a fine-tune fit in CI.
  // Neither set = the whole vocabulary.
  int vocab_limit = 0;
  std::vector<std::string> vocab_corpus;
};

// Reads the tokenizer from `vocab_path` and writes the model to `out_path` (via a temporary file
// renamed into place, so a reader never sees half a file). Errors name the file.
Status make_test_model(const std::string& vocab_path, const std::string& out_path,
                       const TestModelOptions& options = {});

// A LoRA adapter GGUF over `base_path` with random factors (uniform in ±`magnitude`) at `rank`
// for every 2-D weight whose name contains `matching` ("" = all but the embeddings), with
// adapter.lora.alpha = `alpha` (0 = none written). Tests of adapter serving need one without
// training; `extra_tensor` adds a pair for a weight the base does not have (a mismatched adapter).
struct TestAdapterOptions {
  int rank = 4;
  float magnitude = 0.3f;
  float alpha = 0.0f;
  std::string matching;
  std::string extra_tensor;
  std::uint64_t seed = 7;
};
Status make_test_adapter(const std::string& base_path, const std::string& out_path,
                         const TestAdapterOptions& options = {});

// The texts of a corpus file for TestModelOptions::vocab_corpus: every string value of each JSON
// line (text, answer, message contents…), or the line itself when it is not JSON.
Result<std::vector<std::string>> read_corpus_texts(const std::string& path);

// Folder holding llama.cpp's models/ggml-vocab-*.gguf: $HENGSHI_LLAMA_SRC/models when that is
// set, else the llama.cpp source the build was configured with (cmake/llama.cmake).
std::string default_vocab_dir();

// llama.cpp's own llama-bench as built by `scripts/fetch-llama --bench` ($HENGSHI_LLAMA_BENCH
// overrides).
std::string llama_bench_path();

}  // namespace hengshi::edge
