#include "cli/make_test_model_command.h"

#include <cstdio>
#include <memory>

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
};

int run_make_test_model(const MakeTestModelArgs& args) {
#ifdef HENGSHI_HAVE_LLAMA
  edge::TestModelOptions options;
  options.architecture = args.architecture;
  options.layers = args.layers;
  options.embedding = args.embedding;
  options.seed = args.seed;
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
  command->add_option("--pooling", args->pooling,
                      "write a pooling type, as an embedding model has (cache.embedder: llama)")
      ->check(CLI::IsMember({"mean", "cls", "last"}));
  command->callback([args, &exit_code] { exit_code = run_make_test_model(*args); });
}

}  // namespace hengshi::cli
