#include "edge/intent_engine.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <fstream>
#include <set>

#include "edge/intent_dataset.h"
#include "edge/model_field_error.h"

namespace hengshi::edge {
namespace {

Result<nlohmann::json> read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"model_invalid", path.string() + ": missing or unreadable"};
  nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Error{"model_invalid", path.string() + ": invalid JSON"};
  return json;
}

constexpr std::string_view kRequiredFiles[] = {"labels.json", "answers.json", "normalizer.json",
                                               "calibration.json"};

}  // namespace

Result<std::unique_ptr<IntentEngine>> IntentEngine::load(const std::filesystem::path& dir) {
  auto manifest = load_verified_manifest(dir);
  if (!manifest) return manifest.error();
  const std::filesystem::path manifest_path = dir / kManifestFileName;
  // Every file the engine reads must be covered by the manifest's hashes.
  for (std::string_view name : kRequiredFiles) {
    const bool listed = std::any_of(manifest->files.begin(), manifest->files.end(),
                                    [&](const ManifestFile& f) { return f.name == name; });
    if (!listed) {
      return Error{"model_invalid", manifest_path.string() + ": field \"files\": does not list " +
                                        std::string(name)};
    }
  }

  std::unique_ptr<IntentEngine> engine(new IntentEngine());
  engine->dir_ = dir;
  engine->manifest_ = std::move(manifest.value());

  auto normalizer_json = read_json_file(dir / "normalizer.json");
  if (!normalizer_json) return normalizer_json.error();
  auto settings =
      NormalizerSettings::from_json(*normalizer_json, (dir / "normalizer.json").string());
  if (!settings) return settings.error();
  engine->normalizer_ = TextNormalizer(*settings);

  auto calibration_json = read_json_file(dir / "calibration.json");
  if (!calibration_json) return calibration_json.error();
  auto calibrator = Calibrator::from_json(*calibration_json, (dir / "calibration.json").string());
  if (!calibrator) return calibrator.error();
  engine->calibrator_ = std::move(calibrator.value());

  auto model = IntentModel::load(dir / engine->manifest_.model_file);
  if (!model) return model.error();
  engine->model_ = std::move(model.value());
  const std::vector<std::string>& labels = engine->model_->labels();
  if (labels.size() < 2) {
    return Error{"model_invalid",
                 (dir / engine->manifest_.model_file).string() + ": fewer than 2 labels"};
  }

  // labels.json must describe the same label set as the model binary.
  const std::filesystem::path labels_path = dir / "labels.json";
  auto labels_json = read_json_file(labels_path);
  if (!labels_json) return labels_json.error();
  if (!labels_json->is_object() || !labels_json->contains("labels") ||
      !(*labels_json)["labels"].is_array()) {
    return Error{"model_invalid",
                 labels_path.string() + ": field \"labels\": missing or not an array"};
  }
  std::set<std::string> listed;
  for (const auto& row : (*labels_json)["labels"]) {
    if (!row.is_object() || !row.contains("intent") || !row["intent"].is_string()) {
      return Error{"model_invalid",
                   labels_path.string() + ": field \"labels\": rows need \"intent\""};
    }
    listed.insert(row["intent"].get<std::string>());
  }
  if (listed != std::set<std::string>(labels.begin(), labels.end())) {
    return Error{"model_invalid", labels_path.string() +
                                      ": field \"labels\": differs from the labels of " +
                                      engine->manifest_.model_file};
  }

  const std::filesystem::path answers_path = dir / "answers.json";
  auto answers_json = read_json_file(answers_path);
  if (!answers_json) return answers_json.error();
  if (!answers_json->is_object()) {
    return Error{"model_invalid", answers_path.string() + ": not a JSON object (intent → answer)"};
  }
  engine->answers_.assign(labels.size(), std::string());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == kOutOfScopeIntent) {
      engine->oos_index_ = static_cast<int>(i);
      continue;
    }
    const auto it = answers_json->find(labels[i]);
    if (it == answers_json->end()) continue;
    if (!it->is_string()) {
      return model_field_invalid(answers_path, labels[i], "not a string");
    }
    engine->answers_[i] = it->get<std::string>();
  }

  const auto lists = [&](std::string_view name) {
    return std::any_of(engine->manifest_.files.begin(), engine->manifest_.files.end(),
                       [&](const ManifestFile& f) { return f.name == name; });
  };
  if (lists(kOosScoreFile)) {
    if (!lists(kOosNeighboursFile)) {
      return Error{"model_invalid", manifest_path.string() + ": field \"files\": lists " +
                                        std::string(kOosScoreFile) + " but not " +
                                        std::string(kOosNeighboursFile)};
    }
    auto scorer = OosScorer::load(dir, labels.size(), engine->model_->dim());
    if (!scorer) return scorer.error();
    engine->oos_scorer_ = std::move(scorer.value());
  } else {
    spdlog::info(
        "intent model {}: no {} (trained before the out-of-scope score): confidence is the "
        "calibrated intent confidence alone",
        dir.string(), kOosScoreFile);
  }
  return engine;
}

IntentPrediction IntentEngine::predict(std::string_view text) const {
  IntentPrediction prediction;
  const std::string input = normalizer_.to_model_input(text);
  if (input.empty()) {  // nothing to classify: out of scope with no confidence
    prediction.intent = std::string(kOutOfScopeIntent);
    return prediction;
  }
  // Per-thread buffers keep the hot path free of allocations after the first call.
  thread_local std::vector<double> logits;
  thread_local std::vector<double> scratch;
  thread_local std::vector<float> sentence_vector;
  model_->logits(input, logits, sentence_vector);
  const CalibratedTop2 top = calibrator_.apply(logits, scratch);
  const std::vector<std::string>& labels = model_->labels();
  prediction.intent = labels[static_cast<std::size_t>(top.first)];
  if (top.second >= 0) prediction.second_intent = labels[static_cast<std::size_t>(top.second)];
  prediction.intent_confidence = top.confidence;
  if (oos_scorer_) {
    prediction.in_scope =
        oos_scorer_->in_scope(oos_scorer_->features(logits, top.first, sentence_vector));
  }
  prediction.confidence = top.confidence * prediction.in_scope;
  prediction.raw_probability = top.raw_probability;
  prediction.margin = std::max(0.0, top.confidence - top.second_confidence);
  prediction.is_oos = top.first == oos_index_;
  if (!prediction.is_oos) prediction.answer = answers_[static_cast<std::size_t>(top.first)];
  return prediction;
}

std::optional<OosFeatures> IntentEngine::oos_features(std::string_view text) const {
  const std::string input = normalizer_.to_model_input(text);
  if (!oos_scorer_ || input.empty()) return std::nullopt;
  std::vector<double> logits;
  std::vector<float> sentence_vector;
  model_->logits(input, logits, sentence_vector);
  const auto top =
      static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  return oos_scorer_->features(logits, top, sentence_vector);
}

bool answerable(const IntentPrediction& prediction, double min_confidence) {
  return !prediction.is_oos && prediction.intent != kOutOfScopeIntent &&
         !prediction.answer.empty() && prediction.confidence >= min_confidence;
}

std::vector<float> IntentEngine::sentence_vector(std::string_view text) const {
  thread_local std::vector<double> logits;
  std::vector<float> vector;
  model_->logits(normalizer_.to_model_input(text), logits, vector);
  return vector;
}

int IntentEngine::dim() const { return model_->dim(); }

}  // namespace hengshi::edge
