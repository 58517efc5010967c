// The serving side of the intent model: loads a model directory written by
// train_intent_model (intent_trainer.h), verifies it against its manifest, and classifies text
// in microseconds with a calibrated confidence.
//
// Thread-safety: an IntentEngine is immutable after load(); predict() may be called from any
// number of threads at once. To swap models, load a new engine and replace the shared_ptr.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "edge/calibration.h"
#include "edge/intent_model.h"
#include "edge/model_manifest.h"
#include "edge/oos_score.h"
#include "edge/text_normalizer.h"

namespace hengshi::edge {

struct IntentPrediction {
  std::string intent;  // top label; kOutOfScopeIntent ("__oos__") when out of scope
  std::string answer;  // canned answer of `intent`; empty for __oos__ or none in the FAQ
  // P(the edge answer is right): intent_confidence × in_scope. The router's bands gate on it.
  double confidence = 0;
  double intent_confidence = 0;  // calibrated P(intent is right | the question is in scope)
  double in_scope = 1;           // P(in scope) of the out-of-scope score; 1 without one
  double raw_probability = 0;    // the model's own softmax probability of `intent`
  double margin = 0;  // intent_confidence − calibrated probability of the runner-up, ≥ 0
  std::string second_intent;  // the runner-up label
  bool is_oos = true;         // intent == __oos__, or the text has no usable tokens
};

class IntentEngine {
 public:
  // Verifies manifest.json (format, format_version, every file's size and xxh64), then loads the
  // model, labels, answers, normaliser settings, calibrator and, when the manifest lists it, the
  // out-of-scope score (a directory written before it existed loads without: in_scope is then 1
  // and confidence the intent confidence, as before; load logs which). Errors (code
  // "model_invalid") name the file and field at fault.
  static Result<std::unique_ptr<IntentEngine>> load(const std::filesystem::path& dir);

  IntentPrediction predict(std::string_view text) const;

  const std::string& model_version() const { return manifest_.model_version; }
  const ModelManifest& manifest() const { return manifest_; }
  const std::vector<std::string>& labels() const { return model_->labels(); }
  // Canned answers by label index (labels()); empty where the intent has none.
  const std::vector<std::string>& answers() const { return answers_; }
  const TextNormalizer& normalizer() const { return normalizer_; }
  const Calibrator& calibrator() const { return calibrator_; }
  // The out-of-scope score, or null for a directory without oos_score.json.
  const OosScorer* oos_scorer() const { return oos_scorer_ ? &*oos_scorer_ : nullptr; }
  // Every candidate out-of-scope feature of `text` (bench_router measures each one's AUROC);
  // nullopt without an out-of-scope score or for text without usable tokens.
  std::optional<OosFeatures> oos_features(std::string_view text) const;
  const std::filesystem::path& dir() const { return dir_; }
  // The fastText sentence vector of `text` (normalised as the model was trained; model dim floats).
  std::vector<float> sentence_vector(std::string_view text) const;
  int dim() const;

 private:
  IntentEngine() = default;

  std::filesystem::path dir_;
  ModelManifest manifest_;
  std::unique_ptr<IntentModel> model_;
  TextNormalizer normalizer_;
  Calibrator calibrator_;
  std::optional<OosScorer> oos_scorer_;
  std::vector<std::string> answers_;  // by label index; empty when the intent has none
  int oos_index_ = -1;
};

// True when the edge may answer this prediction by itself: in scope, with a canned answer, and
// calibrated confidence ≥ min_confidence. The threshold policy itself belongs to the router.
bool answerable(const IntentPrediction& prediction, double min_confidence);

// Below this P(in scope) a question is more likely outside the model's domain than in it.
inline constexpr double kLikelyOutOfScope = 0.5;
// Whether the model's reading of the question says little about it: labelled out of scope, or
// more likely out of scope than in (a model trained without out-of-scope rows still names its
// nearest intent for a question in another language). Its label and sentence vector then
// compare nothing (the cache's intent guard and the fastText embedder read it so). bench/e2e's
// banking77 model: 99.3% of out-of-scope rows, 6.6% of in-scope test rows.
inline bool likely_out_of_scope(bool is_oos, double in_scope) { return is_oos || in_scope < kLikelyOutOfScope; }
inline bool likely_out_of_scope(const IntentPrediction& prediction) {
  return likely_out_of_scope(prediction.is_oos, prediction.in_scope);
}

}  // namespace hengshi::edge
