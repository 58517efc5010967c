#include "cli/make_test_model_command.h"

#include <cstdio>
#include <memory>
#include <string>

#include "edge/edge_engines.h"
#ifdef HENGSHI_HAVE_LLAMA
#include "edge/llm_test_model.h"
#endif

namespace hengshi::cli {
namespace {

struct MakeTestModelArgs {
  std::string vocab;
  std::string out;
  std::string architecture = "qwen2";
  int layers = 2;
  int embedding = 64;
  std::uint64_t seed = 42;
  std::string pooling;  // "", mean, cls, last
  int feed_forward = 128;
  int context = 256;
  int vocab_limit = 0;
  std::string vocab_corpus;  // a file: JSON lines (every string value) or plain text lines
  bool f32 = false;
  bool untied_output = false;
};

int run_make_test_model(const MakeTestModelArgs& args) {
#ifdef HENGSHI_HAVE_LLAMA
  edge::TestModelOptions options;
  options.architecture = args.architecture;
  options.layers = args.layers;
  options.embedding = args.embedding;
  options.seed = args.seed;
  options.feed_forward = args.feed_forward;
  options.context_length = args.context;
  options.vocab_limit = args.vocab_limit;
  if (!args.vocab_corpus.empty()) {
    auto texts = edge::read_corpus_texts(args.vocab_corpus);
    if (!texts) {
      std::fprintf(stderr, "hengshi make-test-model: %s\n", texts.error().message.c_str());
      return 2;
    }
    options.vocab_corpus = std::move(*texts);
  }
  options.f16 = !args.f32;
  options.untied_output = args.untied_output;
  if (!args.pooling.empty()) options.pooling = args.pooling == "mean" ? 1 : args.pooling == "cls" ? 2 : 3;
  std::string vocab = args.vocab;
  if (vocab.empty()) vocab = edge::default_vocab_dir() + "/ggml-vocab-qwen2.gguf";
  if (auto made = edge::make_test_model(vocab, args.out, options); !made) {
    std::fprintf(stderr, "hengshi make-test-model: %s\n", made.error().message.c_str());
    return 2;
  }
  std::printf("test model (%s, %d layers, n_embd %d, random weights) written to %s\n",
              args.architecture.c_str(), args.layers, args.embedding, args.out.c_str());
  return 0;
#else
  (void)args;
  std::fprintf(stderr, "hengshi make-test-model: this build has no llama.cpp (run scripts/fetch-llama)\n");
  return 2;
#endif
}

}  // namespace

void add_make_test_model_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<MakeTestModelArgs>();
  CLI::App* command = app.add_subcommand(
      "make-test-model", "Write a tiny random-weight GGUF with a real tokenizer (tests, benchmarks)");
  command->add_option("--vocab", args->vocab,
                      "llama.cpp vocabulary GGUF (models/ggml-vocab-*.gguf; default: qwen2 of the "
                      "pinned llama.cpp source)");
  command->add_option("--out", args->out, "GGUF file to write")->required();
  command->add_option("--arch", args->architecture, "qwen2 or llama");
  command->add_option("--layers", args->layers, "transformer blocks")->check(CLI::Range(1, 64));
  command->add_option("--embedding", args->embedding, "n_embd")->check(CLI::Range(16, 4096));
  command->add_option("--seed", args->seed, "weight seed");
  command->add_option("--feed-forward", args->feed_forward, "n_ff")->check(CLI::Range(16, 16384));
  command->add_option("--context", args->context, "training context the model claims")
      ->check(CLI::Range(16, 32768));
  command->add_option("--vocab-limit", args->vocab_limit,
                      "keep the first N tokens of a BPE vocabulary (plus its special tokens); "
                      "0 = all. A small vocabulary makes a fine-tune fast")
      ->check(CLI::Range(0, 1 << 24));
  command->add_option("--vocab-corpus", args->vocab_corpus,
                      "also keep every token the full vocabulary uses for this file's texts "
                      "(JSON lines: all string values; else each line), so it tokenizes as before");
  command->add_flag("--f32", args->f32, "matrices as F32 (what `hengshi finetune` trains)");
  command->add_flag("--untied-output", args->untied_output,
                    "a separate output matrix (llama.cpp cannot train token_embd)");
  command->add_option("--pooling", args->pooling,
                      "write a pooling type, as an embedding model has (cache.embedder: llama)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  command->callback([args, &exit_code] { exit_code = run_make_test_model(*args); });
}

}  // namespace hengshi::cli
