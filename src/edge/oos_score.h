// The out-of-scope score of the intent model: P(the question is one of the model's intents),
// from features of one prediction that a softmax maximum alone does not carry: how far the
// question's sentence vector lies from the training examples, and whether its nearest examples
// carry the predicted intent (neighbour_index.h), beside the softmax's own margin and entropy.
// A small logistic model combines them; it is fitted at train time on held-out rows against
// out-of-scope negatives (intent_trainer.cc) and stored in the model directory as
// oos_score.json (+ oos_neighbours.hnsw), both listed with their hashes in manifest.json.
//
// Thread-safety: an OosScorer is immutable after fit()/load(); features() and in_scope() may be
// called from any number of threads at once.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/result.h"
#include "edge/neighbour_index.h"

namespace hengshi::edge {

inline constexpr std::string_view kOosScoreFile = "oos_score.json";
inline constexpr std::string_view kOosNeighboursFile = "oos_neighbours.hnsw";
inline constexpr std::string_view kOosScoreFormat = "hengshi-oos-score";
inline constexpr int kOosScoreFormatVersion = 1;

// Candidate features of one prediction, each oriented so that larger means "more like the
// training data" (an AUROC above 0.5 for in-scope vs out-of-scope).
enum class OosFeature : int {
  kMaxProbability,       // softmax top-1 probability
  kMargin,               // softmax top-1 − top-2
  kNegEntropy,           // −entropy / log(labels), in [−1, 0]
  kMaxLogit,             // the top logit itself (before normalisation)
  kNeighbourSimilarity,  // cosine to the nearest training example
  kNeighbourAgreement,   // share of the k nearest training examples with the predicted intent
  kIntentSimilarity,     // cosine to the nearest of those with the predicted intent, else 0
  kCentroidSimilarity,   // cosine to the mean training vector of the predicted intent
  // The same in units of that intent's own spread ((cos − its rows' mean cos) / their std): a
  // per-intent decision boundary, as in ADB (Zhang et al., AAAI 2021).
  kCentroidZ,
  kCount
};
inline constexpr std::size_t kOosFeatureCount = static_cast<std::size_t>(OosFeature::kCount);
using OosFeatures = std::array<double, kOosFeatureCount>;
std::string_view oos_feature_name(OosFeature feature);
std::optional<OosFeature> oos_feature_from_name(std::string_view name);

// Area under the ROC curve of `scores` separating positives from negatives (ties count one
// half); 0.5 when either class is empty.
double auroc(const std::vector<double>& scores, const std::vector<bool>& positive);

struct OosFitOptions {
  std::vector<OosFeature> features;  // the ones the logistic model combines
  // Out-of-scope share of the traffic the probability is stated for: the fit weighs both classes
  // equally, then shifts its intercept to this prior.
  double assumed_oos_share = 0.2;
  double l2 = 1e-2;  // ridge on the standardised weights
};

// Per intent: the unit mean of its training rows' unit sentence vectors, and the mean and
// standard deviation of those rows' cosine to it. An intent without rows has a zero centroid.
struct IntentCentroids {
  int dim = 0;
  std::vector<float> centroids;  // labels × dim
  std::vector<double> mean_similarity;
  std::vector<double> std_similarity;  // > 0

  static IntentCentroids build(int dim, std::span<const float> vectors,
                               const std::vector<int>& intents, std::size_t labels);
  // Cosine of `vector` to intent's centroid, and its z-score against the intent's rows.
  std::pair<double, double> similarity(std::span<const float> vector, int intent) const;
};

// One fitting example: features of a held-out prediction and whether the row was in scope.
struct OosExample {
  OosFeatures features{};
  bool in_scope = true;
};

// A stand-in for an out-of-scope question where calibration data has none: a row of an intent
// the auxiliary model never saw (intent_trainer.cc), as that model predicted it. `confidence` is
// what the served engine would report for such a row: the served calibrator over the auxiliary
// model's logits, times P(in scope) from a score fitted without this row (cross-fitted).
// `hengshi calibrate --oos-share S` weighs them to S when the calibration data has no __oos__.
struct SyntheticOosRow {
  std::string intent;  // the predicted intent, one the served model also has
  double confidence = 0;
};

class OosScorer {
 public:
  static constexpr std::size_t kNeighbours = 10;

  OosScorer() = default;

  // Fits the logistic model; the neighbour index is the served model's (its training rows).
  // `fit_info` is stored as the "fit" block of oos_score.json (sources, counts, AUROCs).
  static OosScorer fit(const std::vector<OosExample>& examples, const OosFitOptions& options,
                       NeighbourIndex index, IntentCentroids centroids, nlohmann::json fit_info);

  // Reads dir/oos_score.json and dir/oos_neighbours.hnsw (the caller has verified both against
  // the manifest). `labels` and `dim` are the served model's. Errors: code "model_invalid",
  // naming the file and field.
  static Result<OosScorer> load(const std::filesystem::path& dir, std::size_t labels, int dim);
  // Writes both files into `dir`.
  Status save(const std::filesystem::path& dir) const;

  // Every candidate feature of one prediction: the model's logits, its top label index and the
  // sentence vector the logits came from.
  OosFeatures features(std::span<const double> logits, int top,
                       std::span<const float> sentence_vector) const;
  // P(in scope) at the assumed out-of-scope share, [0, 1].
  double in_scope(const OosFeatures& features) const;

  const std::vector<OosFeature>& kept_features() const { return features_; }
  double assumed_oos_share() const { return assumed_oos_share_; }
  const nlohmann::json& fit_info() const { return fit_info_; }
  const NeighbourIndex& index() const { return index_; }
  const std::vector<SyntheticOosRow>& synthetic_out_of_scope() const { return synthetic_; }
  // Set by the trainer before save(), never once the scorer is shared.
  void set_synthetic_out_of_scope(std::vector<SyntheticOosRow> rows) { synthetic_ = std::move(rows); }

 private:
  std::vector<OosFeature> features_;
  std::vector<double> mean_;     // per kept feature, for standardising
  std::vector<double> scale_;    // per kept feature, > 0
  std::vector<double> weights_;  // per kept feature, on the standardised value
  double bias_ = 0;              // includes the prior shift
  double assumed_oos_share_ = 0.2;
  nlohmann::json fit_info_ = nlohmann::json::object();
  NeighbourIndex index_;
  IntentCentroids centroids_;
  std::vector<SyntheticOosRow> synthetic_;  // optional in the file (older ones have none)
};

}  // namespace hengshi::edge
