#include "cli/train_complexity_command.h"

#include <cstdio>
#include <memory>
#include <string>

#include "router/complexity_trainer.h"

namespace hengshi::cli {
namespace {

struct TrainComplexityArgs {
  std::vector<std::string> data;
  std::string out;
  std::string kind = "features";
  double large_share = 0.5;
  double l2 = 1.0;
  std::uint64_t seed = 1;
};

int run_train_complexity(const TrainComplexityArgs& args) {
  auto kind = router::complexity_kind_from_name(args.kind);
  if (!kind) {
    std::fprintf(stderr, "hengshi train-complexity: %s\n", kind.error().message.c_str());
    return 2;
  }
  router::ComplexityTrainOptions options;
  options.kind = *kind;
  options.large_share = args.large_share;
  options.l2 = args.l2;
  options.seed = args.seed;
  std::vector<router::ComplexitySource> sources;
  for (const auto& text : args.data) {
    auto source = router::parse_complexity_source(text);
    if (!source) {
      std::fprintf(stderr, "hengshi train-complexity: %s\n", source.error().message.c_str());
      return 2;
    }
    sources.push_back(*source);
  }
  auto report = router::train_complexity_directory(sources, args.out, options);
  if (!report) {
    std::fprintf(stderr, "hengshi train-complexity: %s\n", report.error().message.c_str());
    return 2;
  }
  const auto& model = *report->model;
  std::printf("complexity model %s (%s) written to %s\n", model.version().c_str(),
              std::string(router::complexity_kind_name(model.kind())).c_str(), args.out.c_str());
  std::printf("rows %zu, hard (small model wrong) %zu (%.1f%%)\n", report->rows, report->hard_rows,
              100.0 * static_cast<double>(report->hard_rows) / static_cast<double>(report->rows));
  std::printf("ROC AUC on the training rows %.4f (%s); evaluate on held-out groups with "
              "bench_router_complexity\n",
              report->train_auc,
              model.kind() == router::ComplexityKind::kFeatures ? "in-sample" : "cross-fitted");
  std::printf("cut %.4f: about %.0f%% of traffic like the training rows goes to cloud-large\n",
              model.cut(), 100 * model.large_share());
  return 0;
}

}  // namespace

void add_train_complexity_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainComplexityArgs>();
  CLI::App* command = app.add_subcommand(
      "train-complexity", "Train a complexity (difficulty) model directory from JSON Lines");
  command->add_option("--data", args->data,
                      "FILE[:WEIGHT], repeatable: rows {\"text\", \"small_correct\", \"subject\"?}; hard = "
                      "small_correct false; each row of FILE counts WEIGHT times (default 1)")
      ->required();
  command->add_option("--out", args->out, "model directory to write (replaced atomically)")
      ->required();
  command->add_option("--kind", args->kind, "features | fasttext | combined (default features)");
  command->add_option("--large-share", args->large_share,
                      "share of requests the cut sends to cloud-large (default 0.5)")
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--l2", args->l2, "L2 penalty of the logistic model")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--seed", args->seed, "random seed (same data + seed = same model)");
  command->callback([args, &exit_code] { exit_code = run_train_complexity(*args); });
}

}  // namespace hengshi::cli
