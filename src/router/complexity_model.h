// A learned difficulty score (issue 10): P(the small cloud model answers wrong) for a request's
// text, from `hengshi train-complexity`. It replaces the hand-written 1..5 score (complexity.h)
// where one is configured (routing.complexity_model): the router sends a cloud-bound request to
// cloud-large only when the score reaches the model's cut, fitted at training time for a target
// share of large-model calls.
//
// The model is a logistic regression over cheap text features (complexity_vector(): the hand
// score's features plus character-class shares), optionally with the log-odds of a binary
// fastText classifier as one more input ("combined"), or the fastText log-odds alone
// ("fasttext"). The directory:
//   manifest.json    format "hengshi-complexity" v1, version, kind, the cut, training figures,
//                    and the size + xxh64 of every file below
//   weights.json     feature names, standardisation (mean, scale), weights, bias
//   model.bin        fastText binary classifier (kinds fasttext and combined only)
//   normalizer.json  its text normalisation (same settings as the intent model's)
// load() refuses a directory whose manifest is another format or version, or whose files differ
// from the manifest.
//
// Thread-safety: a loaded model is immutable; score() is const and safe from many threads.
// Cost: one UTF-8 pass plus one RE2::Set pass (a few µs for a paragraph); with fastText add its
// normalisation and one forward pass.
#pragma once

#include <array>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "edge/intent_model.h"
#include "edge/text_normalizer.h"
#include "router/complexity.h"

namespace hengshi::router {

inline constexpr std::string_view kComplexityModelFormat = "hengshi-complexity";
inline constexpr int kComplexityModelFormatVersion = 1;

inline constexpr std::size_t kComplexityFeatureCount = 20;
using ComplexityVector = std::array<double, kComplexityFeatureCount>;

// The features' names, in vector order (stored in weights.json and checked on load).
const std::array<std::string_view, kComplexityFeatureCount>& complexity_feature_names();

// `text` UTF-8 (usually the last user message); `conversation_turns` as complexity_features().
ComplexityVector complexity_vector(std::string_view text, int conversation_turns);
// The same from features already computed for `text` (decide() has them for the hand score):
// saves the RE2 pass.
ComplexityVector complexity_vector(const ComplexityFeatures& hand, std::string_view text);

enum class ComplexityKind { kFeatures, kFastText, kCombined };
std::string_view complexity_kind_name(ComplexityKind kind);
Result<ComplexityKind> complexity_kind_from_name(std::string_view name);

// How far (in standard deviations of the training rows) a standardised input may reach. A
// linear score extrapolates without end: "孕21周" is half digits, 18 sd above the training
// mean of digit_share, and that one input made a 4-character question "hard". Capped, an input
// far outside the training range counts as much as the training rows' own extremes.
inline constexpr double kStandardisedInputCap = 4.0;

// A logistic model over standardised inputs: the features, then (kinds with fastText) the
// fastText log-odds as the last input.
struct LogisticWeights {
  std::vector<double> mean;
  std::vector<double> scale;  // > 0
  std::vector<double> weights;
  double bias = 0;
  // |standardised input| is capped here, in training and in scoring; 0 = no cap (models
  // trained before the cap existed, whose weights.json has no "clip").
  double clip = 0;

  // (x - mean[j]) / scale[j], capped at ±clip.
  double standardised(std::size_t j, double x) const;
  double log_odds(std::span<const double> inputs) const;
  nlohmann::json to_json() const;
  static Result<LogisticWeights> from_json(const nlohmann::json& json, std::size_t inputs,
                                           std::string_view source);
};

class ComplexityModel {
 public:
  // Assembles a model in memory (the trainer and tests); `fasttext` is required for the kinds
  // that use it. `cut` is a score in [0, 1].
  ComplexityModel(ComplexityKind kind, LogisticWeights logistic,
                  std::unique_ptr<edge::IntentModel> fasttext, edge::NormalizerSettings normalizer,
                  double cut, double large_share, std::string version);
  ~ComplexityModel();
  ComplexityModel(const ComplexityModel&) = delete;
  ComplexityModel& operator=(const ComplexityModel&) = delete;

  // Reads and verifies a directory written by save(). Errors: "model_invalid", naming the file
  // and field.
  static Result<std::shared_ptr<const ComplexityModel>> load(const std::filesystem::path& dir);
  // Writes the directory's files and manifest.json into `dir` (which must exist); `training`
  // is an informational block stored in the manifest.
  Status save(const std::filesystem::path& dir, const nlohmann::json& training) const;

  // P(hard) in [0, 1]; higher = harder. Never throws.
  double score(std::string_view text, int conversation_turns) const;
  // The same, reusing complexity_features(text, turns) computed by the caller.
  double score(const ComplexityFeatures& hand, std::string_view text) const;
  // The fastText log-odds hard vs easy (0 for the features kind).
  double fasttext_log_odds(std::string_view text) const;
  bool is_hard(double score) const { return score >= cut_; }

  ComplexityKind kind() const { return kind_; }
  double cut() const { return cut_; }
  double large_share() const { return large_share_; }  // the share the cut was fitted for
  const std::string& version() const { return version_; }
  const LogisticWeights& logistic() const { return logistic_; }

 private:
  ComplexityKind kind_;
  LogisticWeights logistic_;
  std::unique_ptr<edge::IntentModel> fasttext_;
  edge::TextNormalizer normalizer_;
  std::size_t hard_label_ = 0;  // index of "hard" in fasttext_->labels()
  double cut_;
  double large_share_;
  std::string version_;
};

}  // namespace hengshi::router
