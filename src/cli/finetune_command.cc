#include "cli/finetune_command.h"

#include <cmath>
#include <cstdio>
#include <memory>

#ifdef HENGSHI_HAVE_LLAMA
#include "edge/llm_finetune.h"
#endif

namespace hengshi::cli {
namespace {

#ifdef HENGSHI_HAVE_LLAMA
void print_scores(const char* name, const edge::AnswerScores& before,
                  const edge::AnswerScores& after) {
  if (before.rows == 0 && after.rows == 0) return;
  std::printf("  %-22s rows %3d  char F1 %.3f -> %.3f  exact %.2f -> %.2f\n", name, after.rows,
              before.mean_f1, after.mean_f1, before.exact, after.exact);
}

int run_finetune(const edge::FinetuneOptions& options) {
  std::printf("finetune: %s on %s -> %s (%s)\n", options.base_model.c_str(),
              options.data_path.c_str(), options.out_dir.c_str(), options.output.c_str());
  std::fflush(stdout);
  auto report = edge::finetune(options, [&options](const edge::FinetuneEpoch& e) {
    std::printf("epoch %d/%d  lr %.2e  train loss %.4f  held-out loss %s  %.1f s\n", e.epoch,
                options.epochs, e.learning_rate, e.train_loss,
                std::isfinite(e.heldout_loss) ? std::to_string(e.heldout_loss).substr(0, 6).c_str()
                                              : "-",
                e.seconds);
    std::fflush(stdout);
  });
  if (!report) {
    std::fprintf(stderr, "hengshi finetune: %s: %s\n", report.error().code.c_str(),
                 report.error().message.c_str());
    return report.error().code == "invalid_argument" || report.error().code == "data_invalid" ? 2 : 1;
  }
  std::printf("rows: %zu train, %zu held out (%zu FAQ rows skipped: no answer); window %zu tokens, "
              "%zu windows, %zu answer tokens\n",
              report->train_rows, report->heldout_rows, report->skipped_rows, report->window,
              report->train_windows, report->answer_tokens);
  std::printf("%.2f s per epoch\n", report->seconds_per_epoch);
  if (options.output == "lora") {
    std::printf("LoRA rank %d: worst matrix relative error %.4f\n", options.lora_rank,
                report->lora_worst_relative_error);
  }
  std::printf("answers (greedy), before -> after:\n");
  print_scores("training questions", report->train_before, report->train_after);
  print_scores("held-out paraphrases", report->heldout_before, report->heldout_after);
  for (const auto& sample : report->samples) {
    std::printf("  Q: %s\n    expected: %s\n    before:   %s\n    after:    %s\n",
                sample.question.c_str(), sample.expected.c_str(), sample.before.c_str(),
                sample.after.c_str());
  }
  std::printf("wrote %s/%s (version %s)\n", report->out_dir.c_str(), report->model_file.c_str(),
              report->version.c_str());
  return 0;
}
#endif

}  // namespace

void add_finetune_command(CLI::App& app, int& exit_code) {
#ifdef HENGSHI_HAVE_LLAMA
  auto options = std::make_shared<edge::FinetuneOptions>();
  CLI::App* command = app.add_subcommand(
      "finetune", "Fine-tune the edge LLM on chat or FAQ rows (llama.cpp's trainer, FP32, CPU)");
  command->add_option("--base", options->base_model, "base model GGUF")->required();
  command->add_option("--data", options->data_path,
                      "JSON Lines: {\"messages\": [...]}, {\"text\", \"answer\"} or FAQ "
                      "{\"text\", \"intent\"} rows")
      ->required();
  command->add_option("--out", options->out_dir, "model directory to write")->required();
  command->add_option("--output", options->output, "lora (an adapter over the base) or full")
      ->check(CLI::IsMember({"lora", "full"}));
  command->add_option("--rank", options->lora_rank, "LoRA rank")->check(CLI::Range(1, 4096));
  command->add_option("--quant", options->quantization, "full model type: q8_0, f16 or f32")
      ->check(CLI::IsMember({"q8_0", "f16", "f32"}));
  command->add_option("--epochs", options->epochs, "passes over the training rows")
      ->check(CLI::Range(1, 100000));
  command->add_option("--lr", options->learning_rate, "AdamW learning rate (first epoch)");
  command->add_option("--lr-min-ratio", options->lr_min_ratio,
                      "last epoch's learning rate as a share of --lr (exponential decay)");
  command->add_option("--heldout", options->heldout_share,
                      "share of each answer's rows held out (paraphrases), [0, 0.5]");
  command->add_option("--seed", options->seed, "split and order seed (same seed = same model)");
  command->add_flag("--pack-rows", options->pack_rows,
                    "several rows per training window: faster, but a row can copy the answer of the "
                    "row before it instead of learning its question (default: a window each)");
  command->add_option("--threads", options->threads, "compute threads (0 = all cores)");
  command->add_option("--eval-rows", options->eval_rows,
                      "score greedy answers before/after on this many training and held-out "
                      "rows each (0 = skip)");
  command->callback([options, &exit_code] { exit_code = run_finetune(*options); });
#else
  CLI::App* command = app.add_subcommand("finetune", "Fine-tune the edge LLM (needs llama.cpp)");
  command->allow_extras();
  command->callback([&exit_code] {
    std::fprintf(stderr, "hengshi finetune: this build has no llama.cpp (run scripts/fetch-llama)\n");
    exit_code = 2;
  });
#endif
}

}  // namespace hengshi::cli
