#include "edge/cross_fit.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string_view>
#include <system_error>

#include "core/progress.h"
#include "edge/intent_dataset.h"
#include "edge/intent_trainer.h"
#include "edge/model_manifest.h"

namespace hengshi::edge {
namespace {

constexpr int kMaxFolds = 20;

// A file the manifest names by path and hash must still be what the model was trained on:
// otherwise the folds would calibrate another recipe than the one served.
Status check_unchanged(const nlohmann::json& training, const char* file_field, const char* hash_field,
                       const char* what) {
  const auto file = training.find(file_field);
  const auto hash = training.find(hash_field);
  if (file == training.end() || !file->is_string() || hash == training.end() || !hash->is_string()) {
    return Error{"model_invalid", std::string("manifest.json: training.") + file_field + " / " + hash_field +
                                      " missing (a model trained before they were recorded cannot be cross-fitted)"};
  }
  auto described = describe_path(file->get<std::string>());
  if (!described) {
    return Error{"data_changed", std::string(what) + " " + file->get<std::string>() +
                                     " is gone: cross-fitting retrains on the model's own data"};
  }
  if (described->xxh64 != hash->get<std::string>()) {
    return Error{"data_changed", std::string(what) + " " + file->get<std::string>() +
                                     " changed since the model was trained (xxh64 " + described->xxh64 +
                                     ", manifest " + hash->get<std::string>() + ")"};
  }
  return Ok{};
}

// The manifest's recipe, without the search: every fold trains exactly the served parameters.
Result<TrainOptions> recipe_of(const ModelManifest& manifest, const IntentEngine& engine) {
  const nlohmann::json& training = manifest.training;
  if (Status s = check_unchanged(training, "data_file", "data_xxh64", "the training data"); !s) return s.error();
  TrainOptions options;
  options.data_path = training.at("data_file").get<std::string>();
  options.autotune_budget_s = 0;
  auto params = fast_text_params_from_json(manifest.hyperparameters);
  if (!params) return params.error();
  options.fixed_params = *params;
  if (training.contains("word_vectors_file")) {
    if (Status s = check_unchanged(training, "word_vectors_file", "word_vectors_xxh64", "the word vectors"); !s) {
      return s.error();
    }
    options.word_vectors = training.at("word_vectors_file").get<std::string>();
  }
  const auto holdout = training.find("holdout_fraction");
  const auto seed = training.find("seed");
  if (holdout == training.end() || !holdout->is_number() || seed == training.end() ||
      !seed->is_number_unsigned()) {
    return Error{"model_invalid", "manifest.json: training.holdout_fraction / seed missing"};
  }
  options.holdout = holdout->get<double>();
  options.seed = seed->get<std::uint64_t>();
  if (const auto quantized = manifest.hyperparameters.find("quantized");
      quantized != manifest.hyperparameters.end() && quantized->is_boolean() && quantized->get<bool>()) {
    options.quantize = true;
    const nlohmann::json q = manifest.hyperparameters.value("quantize", nlohmann::json::object());
    options.quantize_params.cutoff = q.value("cutoff", options.quantize_params.cutoff);
    options.quantize_params.retrain = q.value("retrain", options.quantize_params.retrain);
    options.quantize_params.dsub = q.value("dsub", options.quantize_params.dsub);
    options.quantize_params.qnorm = q.value("qnorm", options.quantize_params.qnorm);
  }
  options.normalizer = engine.normalizer().settings();
  options.oos_score = engine.oos_scorer() != nullptr;
  if (engine.oos_scorer() != nullptr) options.assumed_oos_share = engine.oos_scorer()->assumed_oos_share();
  return options;
}

// Stratified: each intent's rows are shuffled and dealt round-robin, so every fold holds its share
// of every intent (an intent with fewer rows than folds is missing from some).
std::vector<int> deal_folds(const std::vector<IntentExample>& rows, int folds, std::uint64_t seed) {
  std::map<std::string, std::vector<std::size_t>> by_intent;
  for (std::size_t i = 0; i < rows.size(); ++i) by_intent[rows[i].intent].push_back(i);
  std::mt19937_64 rng(seed ^ 0x63726f73732d6669ULL);  // apart from the trainer's own draws
  std::vector<int> fold_of(rows.size(), 0);
  int next = 0;
  for (auto& [intent, indices] : by_intent) {
    std::shuffle(indices.begin(), indices.end(), rng);
    for (std::size_t index : indices) {
      fold_of[index] = next;
      next = (next + 1) % folds;
    }
  }
  return fold_of;
}

Status write_rows(const std::filesystem::path& path, const std::vector<IntentExample>& rows,
                  const std::vector<int>& fold_of, int left_out) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error{"io_error", path.string() + ": cannot write"};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (fold_of[i] == left_out) continue;
    // Replace, not throw: the rows were read as JSON text, so their strings are UTF-8 already.
    out << nlohmann::json{{"text", rows[i].text}, {"intent", rows[i].intent}}.dump(
               -1, ' ', false, nlohmann::json::error_handler_t::replace)
        << '\n';
  }
  if (!out.flush()) return Error{"io_error", path.string() + ": write failed"};
  return Ok{};
}

// The served model's FAQ, as `hengshi train --answers` reads it.
Status write_answers(const std::filesystem::path& path, const IntentEngine& engine) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error{"io_error", path.string() + ": cannot write"};
  const std::vector<std::string>& labels = engine.labels();
  const std::vector<std::string>& answers = engine.answers();
  for (std::size_t i = 0; i < labels.size() && i < answers.size(); ++i) {
    if (answers[i].empty()) continue;
    out << nlohmann::json{{"intent", labels[i]}, {"answer", answers[i]}}.dump(
               -1, ' ', false, nlohmann::json::error_handler_t::replace)
        << '\n';
  }
  if (!out.flush()) return Error{"io_error", path.string() + ": write failed"};
  return Ok{};
}

// Removes the fold models' folder however cross-fitting ends.
struct ScratchFolder {
  std::filesystem::path path;
  ~ScratchFolder() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};

}  // namespace

Result<FastTextParams> fast_text_params_from_json(const nlohmann::json& json) {
  FastTextParams params;
  try {
    params.one_vs_all = json.at("loss").get<std::string>() == "ova";
    params.lr = json.at("lr").get<double>();
    params.epoch = json.at("epoch").get<int>();
    params.dim = json.at("dim").get<int>();
    params.word_ngrams = json.at("word_ngrams").get<int>();
    params.minn = json.at("minn").get<int>();
    params.maxn = json.at("maxn").get<int>();
    params.bucket = json.at("bucket").get<int>();
    params.threads = json.at("threads").get<int>();
    params.seed = json.at("seed").get<int>();
  } catch (const nlohmann::json::exception& e) {
    return Error{"model_invalid", std::string("manifest.json: hyperparameters: ") + e.what()};
  }
  return params;
}

Result<CrossFitReport> cross_fit_predictions(const CrossFitOptions& options) {
  if (options.folds < 2 || options.folds > kMaxFolds) {
    return Error{"invalid_argument", "cross-fit folds must be in [2, " + std::to_string(kMaxFolds) + "] (got " +
                                         std::to_string(options.folds) + ")"};
  }
  const auto started = std::chrono::steady_clock::now();
  auto engine = IntentEngine::load(options.model_dir);
  if (!engine) return engine.error();
  auto recipe = recipe_of((*engine)->manifest(), **engine);
  if (!recipe) return recipe.error();
  auto rows = read_intent_examples(recipe->data_path);
  if (!rows) return rows.error();
  if (rows->size() < static_cast<std::size_t>(options.folds)) {
    return Error{"invalid_argument", "cross-fit: " + std::to_string(rows->size()) + " training rows for " +
                                         std::to_string(options.folds) + " folds"};
  }

  std::error_code ec;
  const std::filesystem::path base =
      options.work_dir.empty() ? std::filesystem::temp_directory_path(ec) : options.work_dir;
  ScratchFolder scratch;
  {
    std::string pattern = (base / "hengshi-cross-fit-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Error{"io_error", "cannot make a folder under " + base.string() + " for the fold models"};
    }
    scratch.path = pattern;
  }
  const std::filesystem::path answers_path = scratch.path / "answers.jsonl";
  if (Status s = write_answers(answers_path, **engine); !s) return s.error();

  CrossFitReport report;
  report.folds = options.folds;
  report.data_file = recipe->data_path;
  report.rows.resize(rows->size());
  const std::vector<int> fold_of = deal_folds(*rows, options.folds, recipe->seed);
  Progress progress("calibrate: cross-fitting folds", static_cast<std::size_t>(options.folds));
  for (int fold = 0; fold < options.folds; ++fold) {
    TrainOptions fold_options = *recipe;
    fold_options.data_path = scratch.path / ("fold-" + std::to_string(fold) + ".jsonl");
    fold_options.out_dir = scratch.path / ("model-" + std::to_string(fold));
    fold_options.answers_path = answers_path;
    if (Status s = write_rows(fold_options.data_path, *rows, fold_of, fold); !s) return s.error();
    auto trained = train_intent_model(fold_options);
    if (!trained) {
      return Error{trained.error().code, "cross-fit fold " + std::to_string(fold + 1) + ": " + trained.error().message};
    }
    auto fold_engine = IntentEngine::load(fold_options.out_dir);
    if (!fold_engine) return fold_engine.error();
    for (std::size_t i = 0; i < rows->size(); ++i) {
      if (fold_of[i] != fold) continue;
      report.rows[i] = OutOfFoldRow{(*rows)[i].text, (*rows)[i].intent, (*fold_engine)->predict((*rows)[i].text), fold};
    }
    std::filesystem::remove_all(fold_options.out_dir, ec);
    progress.advance();
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return report;
}

}  // namespace hengshi::edge
