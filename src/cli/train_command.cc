#include "cli/train_command.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "edge/flywheel.h"
#include "edge/intent_trainer.h"

namespace hengshi::cli {
namespace {

struct TrainArgs {
  std::vector<std::string> data;
  bool unreviewed = false;
  std::string out;
  std::string answers;
  double holdout = 0.1;
  bool quantize = false;
  std::uint64_t seed = 1;
  double search_budget_s = 30;
  bool no_oos_score = false;
  double assumed_oos_share = edge::TrainOptions{}.assumed_oos_share;
  std::string word_vectors;
};

// One data file for the trainer: each --data file checked against its review (a flywheel export
// trains only once a person has marked its sample), rows marked bad left out, files joined.
// Returns the path to train on; `scratch` is set when that is a temporary file to delete.
Result<std::string> training_data(const TrainArgs& args, std::string& scratch) {
  std::vector<edge::ReviewState> reviews;
  bool rewrite = args.data.size() > 1;
  for (const auto& path : args.data) {
    auto review = edge::read_review_state(path);
    if (!review) return review.error();
    if (review->is_export) {
      std::fprintf(stderr, "hengshi train: %s is a flywheel export: %zu of %zu sampled rows reviewed, %zu marked bad\n",
                   path.c_str(), review->reviewed, review->sampled, review->bad_texts.size());
      if (review->reviewed < review->sampled && !args.unreviewed) {
        return Error{"export_unreviewed",
                     path + ": its review sample (" + edge::review_path_of(path) + ") has " +
                         std::to_string(review->sampled - review->reviewed) +
                         " row(s) without a verdict; mark each \"ok\" or \"bad\", or pass --unreviewed"};
      }
      if (review->reviewed > 0) {
        std::fprintf(stderr, "hengshi train: %s: %.1f%% of the reviewed sample was bad\n", path.c_str(),
                     100.0 * static_cast<double>(review->bad_texts.size()) / static_cast<double>(review->reviewed));
      }
      rewrite = rewrite || !review->bad_texts.empty();
    }
    reviews.push_back(std::move(*review));
  }
  if (!rewrite) return args.data.front();
  std::random_device entropy;
  scratch = (std::filesystem::temp_directory_path() / ("hengshi-train-" + std::to_string(entropy()) + ".jsonl")).string();
  std::ofstream out(scratch, std::ios::trunc);
  for (std::size_t i = 0; i < args.data.size(); ++i) {
    std::ifstream in(args.data[i]);
    if (!in) return Error{"data_unreadable", args.data[i] + ": cannot open"};
    std::string line;
    while (std::getline(in, line)) {
      if (!reviews[i].bad_texts.empty()) {
        const auto row = nlohmann::json::parse(line, nullptr, false);
        if (row.is_object() && row.contains("text") && row["text"].is_string() &&
            reviews[i].bad_texts.count(row["text"].get<std::string>())) {
          continue;  // a person said this answer is wrong
        }
      }
      out << line << '\n';
    }
  }
  if (!out.flush()) return Error{"data_unreadable", scratch + ": cannot write the joined data"};
  return scratch;
}

int run_train(const TrainArgs& args) {
  std::string scratch;
  auto data = training_data(args, scratch);
  if (!data) {
    std::fprintf(stderr, "hengshi train: %s\n", data.error().message.c_str());
    return 2;
  }
  struct RemoveScratch {
    const std::string& path;
    ~RemoveScratch() {
      if (!path.empty()) std::remove(path.c_str());
    }
  } remove_scratch{scratch};
  edge::TrainOptions options;
  options.data_path = *data;
  options.out_dir = args.out;
  options.holdout = args.holdout;
  options.quantize = args.quantize;
  options.seed = args.seed;
  options.autotune_budget_s = args.search_budget_s;
  options.oos_score = !args.no_oos_score;
  options.assumed_oos_share = args.assumed_oos_share;
  if (!args.answers.empty()) options.answers_path = args.answers;
  if (!args.word_vectors.empty()) options.word_vectors = args.word_vectors;

  auto report = edge::train_intent_model(options);
  if (!report) {
    std::fprintf(stderr, "hengshi train: %s\n", report.error().message.c_str());
    return 2;
  }
  const auto& r = *report;
  std::printf("model %s written to %s (%s, %llu bytes)\n", r.model_version.c_str(),
              r.out_dir.string().c_str(), r.model_file.c_str(),
              static_cast<unsigned long long>(r.model_bytes));
  std::printf("rows %zu: train %zu (validation %zu), holdout %zu; intents %zu; __oos__ rows %zu\n",
              r.rows, r.train_rows, r.validation_rows, r.holdout_rows, r.intents, r.oos_rows);
  std::printf("search: %zu trial(s) in %.1f s; chosen %s\n", r.trials.size(), r.search_seconds,
              r.params.to_json().dump().c_str());
  std::printf("holdout accuracy %.4f; ECE %.4f raw -> %.4f calibrated (%s, fitted on %s)\n",
              r.holdout_accuracy, r.holdout_ece_before, r.holdout_ece_after,
              std::string(edge::calibration_method_name(r.calibration.calibrator.method())).c_str(), r.calibration_source.c_str());
  if (!r.holdout_reliability.empty()) {
    std::printf("reliability on the holdout (calibrated):\n  %-13s %7s %9s %9s\n", "confidence",
                "count", "mean conf", "accuracy");
    for (const auto& bin : r.holdout_reliability) {
      if (bin.count == 0) continue;
      std::printf("  [%.1f, %.1f)    %7zu %9.3f %9.3f\n", bin.lower, bin.upper, bin.count,
                  bin.mean_confidence, bin.accuracy);
    }
  }
  if (r.oos_score) {
    // The fit's own rows (held-out intents as out of scope); bench_router measures it on test data.
    const nlohmann::json auroc = r.oos_fit.value("auroc", nlohmann::json::object());
    std::printf("out-of-scope score: %s positives, %s negatives; AUROC %.3f combined (in sample)\n",
                r.oos_fit.value("positives", nlohmann::json()).dump().c_str(),
                r.oos_fit.value("negatives", nlohmann::json()).dump().c_str(),
                auroc.value("combined", 0.0));
  } else {
    std::printf("out-of-scope score: none (confidence is the intent confidence alone)\n");
  }
  for (const auto& warning : r.warnings) std::printf("warning: %s\n", warning.c_str());
  std::printf("trained in %.1f s\n", r.total_seconds);
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* train = app.add_subcommand("train", "Train an intent model directory from JSON Lines");
  train->add_option("--data", args->data,
                    "rows {\"text\", \"intent\", \"answer\"?}; __oos__ = out of scope (repeat to join files)")
      ->required();
  train->add_flag("--unreviewed", args->unreviewed,
                  "train on a flywheel export whose review sample is not fully marked");
  train->add_option("--out", args->out, "model directory to write (replaced atomically)")->required();
  train->add_option("--holdout", args->holdout, "share of rows held out for calibration and metrics")
      ->check(CLI::Range(0.0, 0.5));
  train->add_flag("--quantize", args->quantize, "write a quantised model.ftz");
  train->add_option("--answers", args->answers, "FAQ rows {\"intent\", \"answer\"} (win over the data's)")
      ->check(CLI::ExistingFile);
  train->add_option("--seed", args->seed, "random seed (same data + seed = same model)");
  train->add_option("--search-budget", args->search_budget_s,
                    "hyper-parameter search budget in predicted CPU seconds (0 = no search)")
      ->check(CLI::NonNegativeNumber);
  train->add_flag("--no-oos-score", args->no_oos_score,
                  "no out-of-scope score: confidence is the intent confidence alone");
  train->add_option("--assumed-oos-share", args->assumed_oos_share,
                    "out-of-scope share of traffic the score states P(in scope) for")
      ->check(CLI::Range(0.01, 0.99));
  train->add_option("--word-vectors", args->word_vectors,
                    "pretrained word vectors (.vec) to start from; sets the model's width "
                    "(scripts/fetch-word-vectors makes English ones)")
      ->check(CLI::ExistingFile);
  train->callback([args, &exit_code] { exit_code = run_train(*args); });
}

}  // namespace hengshi::cli
