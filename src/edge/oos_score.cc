#include "edge/oos_score.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "core/sigmoid.h"
#include "edge/model_field_error.h"

namespace hengshi::edge {
namespace {

constexpr std::array<std::string_view, kOosFeatureCount> kFeatureNames = {"max_probability",
                                                                          "margin",
                                                                          "neg_entropy",
                                                                          "max_logit",
                                                                          "neighbour_similarity",
                                                                          "neighbour_agreement",
                                                                          "intent_similarity",
                                                                          "centroid_similarity",
                                                                          "centroid_z"};

// Solves a·x = b (n ≤ 8, symmetric positive definite after the ridge) by Gaussian elimination
// with partial pivoting; a and b are overwritten.
std::vector<double> solve(std::vector<std::vector<double>> a, std::vector<double> b) {
  const std::size_t n = b.size();
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    for (std::size_t r = col + 1; r < n; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    if (std::abs(a[col][col]) < 1e-12) continue;
    for (std::size_t r = col + 1; r < n; ++r) {
      const double factor = a[r][col] / a[col][col];
      for (std::size_t c = col; c < n; ++c) a[r][c] -= factor * a[col][c];
      b[r] -= factor * b[col];
    }
  }
  std::vector<double> x(n, 0.0);
  for (std::size_t i = n; i-- > 0;) {
    if (std::abs(a[i][i]) < 1e-12) continue;
    double sum = b[i];
    for (std::size_t c = i + 1; c < n; ++c) sum -= a[i][c] * x[c];
    x[i] = sum / a[i][i];
  }
  return x;
}

// Cosine of two vectors (0 when either is zero).
double cosine(const float* a, const float* b, std::size_t width) {
  double dot = 0, norm_a = 0, norm_b = 0;
  for (std::size_t j = 0; j < width; ++j) {
    dot += static_cast<double>(a[j]) * b[j];
    norm_a += static_cast<double>(a[j]) * a[j];
    norm_b += static_cast<double>(b[j]) * b[j];
  }
  return norm_a <= 0 || norm_b <= 0 ? 0.0 : dot / std::sqrt(norm_a * norm_b);
}

}  // namespace

IntentCentroids IntentCentroids::build(int dim, std::span<const float> vectors,
                                       const std::vector<int>& intents, std::size_t labels) {
  IntentCentroids out;
  out.dim = dim;
  const auto width = static_cast<std::size_t>(dim);
  out.centroids.assign(labels * width, 0.0f);
  out.mean_similarity.assign(labels, 0.0);
  out.std_similarity.assign(labels, 1.0);
  std::vector<double> sums(labels * width, 0.0);
  for (std::size_t row = 0; row < intents.size(); ++row) {
    const float* v = &vectors[row * width];
    double norm = 0;
    for (std::size_t j = 0; j < width; ++j) norm += static_cast<double>(v[j]) * v[j];
    if (norm <= 0) continue;
    const double inverse = 1.0 / std::sqrt(norm);
    const auto label = static_cast<std::size_t>(intents[row]);
    for (std::size_t j = 0; j < width; ++j) sums[label * width + j] += v[j] * inverse;
  }
  for (std::size_t i = 0; i < sums.size(); ++i) out.centroids[i] = static_cast<float>(sums[i]);
  std::vector<double> sum(labels, 0.0), sum_sq(labels, 0.0), count(labels, 0.0);
  for (std::size_t row = 0; row < intents.size(); ++row) {
    const auto label = static_cast<std::size_t>(intents[row]);
    const double c = cosine(&vectors[row * width], &out.centroids[label * width], width);
    sum[label] += c;
    sum_sq[label] += c * c;
    count[label] += 1;
  }
  for (std::size_t label = 0; label < labels; ++label) {
    if (count[label] == 0) continue;
    out.mean_similarity[label] = sum[label] / count[label];
    const double variance =
        std::max(0.0, sum_sq[label] / count[label] -
                          out.mean_similarity[label] * out.mean_similarity[label]);
    out.std_similarity[label] = std::max(std::sqrt(variance), 0.02);  // a floor for tiny intents
  }
  return out;
}

std::pair<double, double> IntentCentroids::similarity(std::span<const float> vector,
                                                      int intent) const {
  const auto width = static_cast<std::size_t>(dim);
  const auto label = static_cast<std::size_t>(intent);
  if (intent < 0 || label >= mean_similarity.size() || vector.size() != width) return {0.0, -10.0};
  const double c = cosine(vector.data(), &centroids[label * width], width);
  return {c, (c - mean_similarity[label]) / std_similarity[label]};
}

std::string_view oos_feature_name(OosFeature feature) {
  return kFeatureNames[static_cast<std::size_t>(feature)];
}

std::optional<OosFeature> oos_feature_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kFeatureNames.size(); ++i) {
    if (kFeatureNames[i] == name) return static_cast<OosFeature>(i);
  }
  return std::nullopt;
}

double auroc(const std::vector<double>& scores, const std::vector<bool>& positive) {
  std::vector<std::size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  // Mann–Whitney U from mid-ranks of tied groups.
  double positive_rank_sum = 0;
  std::size_t positives = 0;
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mid_rank = (static_cast<double>(i) + static_cast<double>(j - 1)) / 2.0 + 1.0;
    for (std::size_t k = i; k < j; ++k) {
      if (positive[order[k]]) {
        positive_rank_sum += mid_rank;
        ++positives;
      }
    }
    i = j;
  }
  const std::size_t negatives = scores.size() - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  const auto p = static_cast<double>(positives);
  return (positive_rank_sum - p * (p + 1) / 2.0) / (p * static_cast<double>(negatives));
}

OosScorer OosScorer::fit(const std::vector<OosExample>& examples, const OosFitOptions& options,
                         NeighbourIndex index, IntentCentroids centroids, nlohmann::json fit_info) {
  OosScorer scorer;
  scorer.centroids_ = std::move(centroids);
  scorer.features_ = options.features;
  scorer.assumed_oos_share_ = std::clamp(options.assumed_oos_share, 1e-3, 1 - 1e-3);
  scorer.index_ = std::move(index);
  const std::size_t d = scorer.features_.size();
  scorer.mean_.assign(d, 0.0);
  scorer.scale_.assign(d, 1.0);
  scorer.weights_.assign(d, 0.0);

  std::size_t positives = 0;
  for (const OosExample& e : examples) positives += e.in_scope ? 1 : 0;
  const std::size_t negatives = examples.size() - positives;
  if (positives > 0 && negatives > 0 && d > 0) {
    const auto n = static_cast<double>(examples.size());
    for (std::size_t f = 0; f < d; ++f) {
      const auto index_f = static_cast<std::size_t>(scorer.features_[f]);
      double sum = 0, sum_sq = 0;
      for (const OosExample& e : examples) {
        sum += e.features[index_f];
        sum_sq += e.features[index_f] * e.features[index_f];
      }
      scorer.mean_[f] = sum / n;
      const double variance = std::max(0.0, sum_sq / n - scorer.mean_[f] * scorer.mean_[f]);
      scorer.scale_[f] = variance > 1e-12 ? std::sqrt(variance) : 1.0;
    }
    // Standardised design with an intercept column last; classes weighted to equal mass.
    std::vector<std::vector<double>> x(examples.size(), std::vector<double>(d + 1, 1.0));
    std::vector<double> weight(examples.size());
    for (std::size_t i = 0; i < examples.size(); ++i) {
      for (std::size_t f = 0; f < d; ++f) {
        x[i][f] = (examples[i].features[static_cast<std::size_t>(scorer.features_[f])] -
                   scorer.mean_[f]) /
                  scorer.scale_[f];
      }
      weight[i] = examples[i].in_scope ? 0.5 / static_cast<double>(positives)
                                       : 0.5 / static_cast<double>(negatives);
    }
    // Newton's method on the weighted, ridge-penalised log-loss: a handful of steps converge.
    std::vector<double> beta(d + 1, 0.0);
    for (int step = 0; step < 30; ++step) {
      std::vector<double> gradient(d + 1, 0.0);
      std::vector<std::vector<double>> hessian(d + 1, std::vector<double>(d + 1, 0.0));
      for (std::size_t i = 0; i < examples.size(); ++i) {
        double z = 0;
        for (std::size_t c = 0; c <= d; ++c) z += beta[c] * x[i][c];
        const double p = sigmoid(z);
        const double residual = p - (examples[i].in_scope ? 1.0 : 0.0);
        const double curvature = std::max(p * (1 - p), 1e-9);
        for (std::size_t r = 0; r <= d; ++r) {
          gradient[r] += weight[i] * residual * x[i][r];
          for (std::size_t c = 0; c <= d; ++c) {
            hessian[r][c] += weight[i] * curvature * x[i][r] * x[i][c];
          }
        }
      }
      for (std::size_t f = 0; f < d; ++f) {  // no ridge on the intercept
        gradient[f] += options.l2 * beta[f];
        hessian[f][f] += options.l2;
      }
      const std::vector<double> delta = solve(hessian, gradient);
      double change = 0;
      for (std::size_t c = 0; c <= d; ++c) {
        beta[c] -= delta[c];
        change = std::max(change, std::abs(delta[c]));
      }
      if (change < 1e-8) break;
    }
    std::copy(beta.begin(), beta.begin() + static_cast<std::ptrdiff_t>(d), scorer.weights_.begin());
    scorer.bias_ = beta[d];
  }
  // The fit saw both classes at equal mass; state the probability at the assumed prior.
  scorer.bias_ += std::log((1 - scorer.assumed_oos_share_) / scorer.assumed_oos_share_);
  fit_info["positives"] = positives;
  fit_info["negatives"] = negatives;
  // Each candidate's AUROC and the combination's, on the fitting rows (in-sample for the
  // combination; bench_router measures it out of sample).
  std::vector<bool> positive;
  for (const OosExample& e : examples) positive.push_back(e.in_scope);
  nlohmann::json aurocs = nlohmann::json::object();
  std::vector<double> scores(examples.size());
  for (std::size_t f = 0; f < kOosFeatureCount; ++f) {
    for (std::size_t i = 0; i < examples.size(); ++i) scores[i] = examples[i].features[f];
    aurocs[std::string(kFeatureNames[f])] = auroc(scores, positive);
  }
  for (std::size_t i = 0; i < examples.size(); ++i)
    scores[i] = scorer.in_scope(examples[i].features);
  aurocs["combined"] = auroc(scores, positive);
  fit_info["auroc"] = aurocs;
  scorer.fit_info_ = std::move(fit_info);
  return scorer;
}

OosFeatures OosScorer::features(std::span<const double> logits, int top,
                                std::span<const float> sentence_vector) const {
  OosFeatures out{};
  if (logits.empty() || top < 0) return out;
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (double z : logits) sum += std::exp(z - max_logit);
  double first = 0, second = 0, entropy = 0;
  for (double z : logits) {
    const double p = std::exp(z - max_logit) / sum;
    if (p > first) {
      second = first;
      first = p;
    } else if (p > second) {
      second = p;
    }
    if (p > 0) entropy -= p * std::log(p);
  }
  const double max_entropy = std::log(static_cast<double>(std::max<std::size_t>(logits.size(), 2)));
  out[static_cast<std::size_t>(OosFeature::kMaxProbability)] = first;
  out[static_cast<std::size_t>(OosFeature::kMargin)] = first - second;
  out[static_cast<std::size_t>(OosFeature::kNegEntropy)] = -entropy / max_entropy;
  out[static_cast<std::size_t>(OosFeature::kMaxLogit)] = max_logit;

  thread_local std::vector<NeighbourIndex::Neighbour> neighbours;
  index_.nearest(sentence_vector, kNeighbours, neighbours);
  if (!neighbours.empty()) {
    std::size_t agreeing = 0;
    double intent_similarity = 0;
    for (const NeighbourIndex::Neighbour& n : neighbours) {
      if (n.intent != top) continue;
      if (agreeing == 0) intent_similarity = n.similarity;  // most similar first
      ++agreeing;
    }
    out[static_cast<std::size_t>(OosFeature::kNeighbourSimilarity)] = neighbours.front().similarity;
    out[static_cast<std::size_t>(OosFeature::kNeighbourAgreement)] =
        static_cast<double>(agreeing) / static_cast<double>(neighbours.size());
    out[static_cast<std::size_t>(OosFeature::kIntentSimilarity)] = intent_similarity;
  }
  const auto [centroid, z] = centroids_.similarity(sentence_vector, top);
  out[static_cast<std::size_t>(OosFeature::kCentroidSimilarity)] = centroid;
  out[static_cast<std::size_t>(OosFeature::kCentroidZ)] = z;
  return out;
}

double OosScorer::in_scope(const OosFeatures& features) const {
  double z = bias_;
  for (std::size_t f = 0; f < features_.size(); ++f) {
    z += weights_[f] * (features[static_cast<std::size_t>(features_[f])] - mean_[f]) / scale_[f];
  }
  return sigmoid(z);
}

Status OosScorer::save(const std::filesystem::path& dir) const {
  nlohmann::json names = nlohmann::json::array();
  for (OosFeature f : features_) names.push_back(std::string(oos_feature_name(f)));
  nlohmann::json json = {{"format", std::string(kOosScoreFormat)},
                               {"format_version", kOosScoreFormatVersion},
                               {"model", "logistic"},
                               {"features", names},
                               {"mean", mean_},
                               {"scale", scale_},
                               {"weights", weights_},
                               {"bias", bias_},
                               {"assumed_oos_share", assumed_oos_share_},
                               {"neighbours", kNeighbours},
                               {"neighbour_index", std::string(kOosNeighboursFile)},
                               {"dim", index_.dim()},
                               {"neighbour_intents", index_.intents()},
                               {"centroids", centroids_.centroids},
                               {"centroid_mean_similarity", centroids_.mean_similarity},
                               {"centroid_std_similarity", centroids_.std_similarity},
                               {"fit", fit_info_}};
  nlohmann::json synthetic_intents = nlohmann::json::array();
  nlohmann::json synthetic_confidence = nlohmann::json::array();
  for (const SyntheticOosRow& row : synthetic_) {
    synthetic_intents.push_back(row.intent);
    // Four decimals: calibration buckets are tenths, and the file stays small.
    synthetic_confidence.push_back(std::round(row.confidence * 1e4) / 1e4);
  }
  json["synthetic_out_of_scope"] = {{"intents", synthetic_intents},
                                    {"confidence", synthetic_confidence}};
  const std::filesystem::path path = dir / kOosScoreFile;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.close();
  if (!out) return Error{"io_error", path.string() + ": cannot write"};
  return index_.save(dir / kOosNeighboursFile);
}

Result<OosScorer> OosScorer::load(const std::filesystem::path& dir, std::size_t labels, int dim) {
  const std::filesystem::path path = dir / kOosScoreFile;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"model_invalid", path.string() + ": missing or unreadable"};
  const nlohmann::json json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return Error{"model_invalid", path.string() + ": invalid JSON"};
  }
  if (json.value("format", std::string()) != kOosScoreFormat) {
    return model_field_invalid(path, "format", "expected \"" + std::string(kOosScoreFormat) + "\"");
  }
  if (!json.contains("format_version") || !json["format_version"].is_number_integer() ||
      json["format_version"].get<int>() != kOosScoreFormatVersion) {
    return model_field_invalid(
        path, "format_version",
        "this build reads version " + std::to_string(kOosScoreFormatVersion));
  }
  OosScorer scorer;
  if (!json.contains("features") || !json["features"].is_array()) {
    return model_field_invalid(path, "features", "missing or not an array");
  }
  for (const auto& name : json["features"]) {
    const auto feature =
        name.is_string() ? oos_feature_from_name(name.get<std::string>()) : std::nullopt;
    if (!feature) return model_field_invalid(path, "features", "unknown feature " + name.dump());
    scorer.features_.push_back(*feature);
  }
  const std::size_t d = scorer.features_.size();
  const auto numbers = [&](std::string_view field, std::vector<double>& out) -> Status {
    const auto it = json.find(field);
    if (it == json.end() || !it->is_array() || it->size() != d) {
      return model_field_invalid(path, field, "missing, or not one number per feature");
    }
    for (const auto& v : *it) {
      if (!v.is_number()) return model_field_invalid(path, field, "not a number");
      out.push_back(v.get<double>());
    }
    return Ok{};
  };
  if (Status s = numbers("mean", scorer.mean_); !s) return s.error();
  if (Status s = numbers("scale", scorer.scale_); !s) return s.error();
  if (Status s = numbers("weights", scorer.weights_); !s) return s.error();
  if (std::any_of(scorer.scale_.begin(), scorer.scale_.end(), [](double s) { return !(s > 0); })) {
    return model_field_invalid(path, "scale", "must be > 0");
  }
  if (!json.contains("bias") || !json["bias"].is_number()) {
    return model_field_invalid(path, "bias", "missing or not a number");
  }
  scorer.bias_ = json["bias"].get<double>();
  scorer.assumed_oos_share_ = json.value("assumed_oos_share", 0.2);
  if (json.value("dim", -1) != dim) {
    return model_field_invalid(path, "dim",
                               "differs from the model's dimension " + std::to_string(dim));
  }
  if (!json.contains("neighbour_intents") || !json["neighbour_intents"].is_array()) {
    return model_field_invalid(path, "neighbour_intents", "missing or not an array");
  }
  std::vector<int> intents;
  intents.reserve(json["neighbour_intents"].size());
  for (const auto& v : json["neighbour_intents"]) {
    if (!v.is_number_integer() || v.get<long long>() < 0 ||
        v.get<long long>() >= static_cast<long long>(labels)) {
      return model_field_invalid(path, "neighbour_intents", "not a label index of the model");
    }
    intents.push_back(v.get<int>());
  }
  IntentCentroids& centroids = scorer.centroids_;
  centroids.dim = dim;
  const auto read_array = [&](std::string_view field, std::size_t size, auto& out) -> Status {
    const auto it = json.find(field);
    if (it == json.end() || !it->is_array() || it->size() != size) {
      return model_field_invalid(path, field,
                                 "missing or not " + std::to_string(size) + " numbers");
    }
    for (const auto& v : *it) {
      if (!v.is_number()) return model_field_invalid(path, field, "not a number");
      out.push_back(v.template get<typename std::decay_t<decltype(out)>::value_type>());
    }
    return Ok{};
  };
  if (Status s =
          read_array("centroids", labels * static_cast<std::size_t>(dim), centroids.centroids);
      !s) {
    return s.error();
  }
  if (Status s = read_array("centroid_mean_similarity", labels, centroids.mean_similarity); !s) {
    return s.error();
  }
  if (Status s = read_array("centroid_std_similarity", labels, centroids.std_similarity); !s) {
    return s.error();
  }
  if (std::any_of(centroids.std_similarity.begin(), centroids.std_similarity.end(),
                  [](double s) { return !(s > 0); })) {
    return model_field_invalid(path, "centroid_std_similarity", "must be > 0");
  }
  auto index = NeighbourIndex::load(dir / kOosNeighboursFile, dim, std::move(intents));
  if (!index) return index.error();
  scorer.index_ = std::move(index.value());
  if (json.contains("fit") && json["fit"].is_object()) scorer.fit_info_ = json["fit"];
  if (const auto it = json.find("synthetic_out_of_scope"); it != json.end()) {
    const auto intents = it->find("intents");
    const auto confidence = it->find("confidence");
    if (!it->is_object() || intents == it->end() || confidence == it->end() ||
        !intents->is_array() || !confidence->is_array() || intents->size() != confidence->size()) {
      return model_field_invalid(path, "synthetic_out_of_scope",
                                 "not {intents, confidence} arrays of the same length");
    }
    for (std::size_t i = 0; i < intents->size(); ++i) {
      const nlohmann::json& intent = (*intents)[i];
      const nlohmann::json& c = (*confidence)[i];
      if (!intent.is_string() || !c.is_number() || !(c.get<double>() >= 0 && c.get<double>() <= 1)) {
        return model_field_invalid(
            path, "synthetic_out_of_scope",
            "row " + std::to_string(i) + ": not an intent and a confidence in [0, 1]");
      }
      scorer.synthetic_.push_back({intent.get<std::string>(), c.get<double>()});
    }
  }
  return scorer;
}

}  // namespace hengshi::edge
