#include "edge/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

#include "edge/model_field_error.h"

namespace hengshi::edge {
namespace {

constexpr double kMinTemperature = 0.05;
constexpr double kMaxTemperature = 100.0;

int bin_of(double confidence, int bins) {
  const double clamped = std::clamp(confidence, 0.0, 1.0);
  return std::min(bins - 1, static_cast<int>(clamped * bins));
}

int argmax(std::span<const double> values) {
  return values.empty()
             ? -1
             : static_cast<int>(std::max_element(values.begin(), values.end()) - values.begin());
}

// Top-1 confidence and correctness of `calibrator` on each example.
void score(const Calibrator& calibrator, const std::vector<LabeledLogits>& examples,
           const std::vector<std::size_t>& indices, std::vector<double>& confidences,
           std::vector<bool>& correct) {
  std::vector<double> scratch;
  for (std::size_t i : indices) {
    const CalibratedTop2 top = calibrator.apply(examples[i].logits, scratch);
    confidences.push_back(top.confidence);
    correct.push_back(top.first == examples[i].label);
  }
}

Calibrator fit_method(CalibrationMethod method, const std::vector<LabeledLogits>& examples) {
  switch (method) {
    case CalibrationMethod::kIdentity:
      return Calibrator();
    case CalibrationMethod::kTemperature:
      return Calibrator::temperature(fit_temperature(examples));
    case CalibrationMethod::kIsotonic: {
      const double temperature = fit_temperature(examples);
      const Calibrator scaled = Calibrator::temperature(temperature);
      std::vector<double> confidences;
      std::vector<bool> correct;
      std::vector<std::size_t> all(examples.size());
      std::iota(all.begin(), all.end(), 0);
      score(scaled, examples, all, confidences, correct);
      return Calibrator::isotonic(temperature, IsotonicMap::fit(confidences, correct));
    }
  }
  return Calibrator();
}

}  // namespace

std::vector<ReliabilityBin> reliability_table(const std::vector<double>& confidences,
                                              const std::vector<bool>& correct, int bins) {
  bins = std::max(bins, 1);
  std::vector<ReliabilityBin> table(static_cast<std::size_t>(bins));
  std::vector<double> confidence_sum(table.size(), 0.0);
  std::vector<double> correct_sum(table.size(), 0.0);
  const std::size_t n = std::min(confidences.size(), correct.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto b = static_cast<std::size_t>(bin_of(confidences[i], bins));
    ++table[b].count;
    confidence_sum[b] += std::clamp(confidences[i], 0.0, 1.0);
    correct_sum[b] += correct[i] ? 1.0 : 0.0;
  }
  for (std::size_t b = 0; b < table.size(); ++b) {
    table[b].lower = static_cast<double>(b) / bins;
    table[b].upper = static_cast<double>(b + 1) / bins;
    if (table[b].count > 0) {
      table[b].mean_confidence = confidence_sum[b] / static_cast<double>(table[b].count);
      table[b].accuracy = correct_sum[b] / static_cast<double>(table[b].count);
    }
  }
  return table;
}

double expected_calibration_error(const std::vector<double>& confidences,
                                  const std::vector<bool>& correct, int bins) {
  const std::size_t n = std::min(confidences.size(), correct.size());
  if (n == 0) return 0.0;
  double ece = 0.0;
  for (const ReliabilityBin& bin : reliability_table(confidences, correct, bins)) {
    ece += static_cast<double>(bin.count) / static_cast<double>(n) *
           std::abs(bin.accuracy - bin.mean_confidence);
  }
  return ece;
}

nlohmann::json reliability_to_json(const std::vector<ReliabilityBin>& table) {
  nlohmann::json rows = nlohmann::json::array();
  for (const ReliabilityBin& bin : table) {
    rows.push_back({{"lower", bin.lower},
                    {"upper", bin.upper},
                    {"count", bin.count},
                    {"mean_confidence", bin.mean_confidence},
                    {"accuracy", bin.accuracy}});
  }
  return rows;
}

void softmax(std::span<const double> logits, double temperature,
             std::vector<double>& probabilities) {
  probabilities.resize(logits.size());
  if (logits.empty()) return;
  const double max_logit = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (std::size_t i = 0; i < logits.size(); ++i) {
    probabilities[i] = std::exp((logits[i] - max_logit) / temperature);
    sum += probabilities[i];
  }
  for (double& p : probabilities) p /= sum;
}

double mean_nll(const std::vector<LabeledLogits>& examples, double temperature) {
  if (examples.empty()) return 0.0;
  double total = 0.0;
  for (const LabeledLogits& example : examples) {
    // log softmax(z/T)[y] = z_y/T − logsumexp(z/T), computed stably.
    const auto& z = example.logits;
    const double max_logit = *std::max_element(z.begin(), z.end());
    double sum = 0.0;
    for (double v : z) sum += std::exp((v - max_logit) / temperature);
    const double log_prob =
        (z[static_cast<std::size_t>(example.label)] - max_logit) / temperature - std::log(sum);
    total -= log_prob;
  }
  return total / static_cast<double>(examples.size());
}

double fit_temperature(const std::vector<LabeledLogits>& examples) {
  if (examples.empty()) return 1.0;
  // Golden-section search over u = log T.
  const double inv_phi = (std::sqrt(5.0) - 1.0) / 2.0;
  double lo = std::log(kMinTemperature);
  double hi = std::log(kMaxTemperature);
  double a = hi - inv_phi * (hi - lo);
  double b = lo + inv_phi * (hi - lo);
  double fa = mean_nll(examples, std::exp(a));
  double fb = mean_nll(examples, std::exp(b));
  for (int iteration = 0; iteration < 60 && hi - lo > 1e-4; ++iteration) {
    if (fa <= fb) {
      hi = b;
      b = a;
      fb = fa;
      a = hi - inv_phi * (hi - lo);
      fa = mean_nll(examples, std::exp(a));
    } else {
      lo = a;
      a = b;
      fa = fb;
      b = lo + inv_phi * (hi - lo);
      fb = mean_nll(examples, std::exp(b));
    }
  }
  return std::exp((lo + hi) / 2.0);
}

IsotonicMap IsotonicMap::fit(const std::vector<double>& scores, const std::vector<bool>& correct) {
  const std::size_t n = std::min(scores.size(), correct.size());
  IsotonicMap map;
  if (n == 0) return map;
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t l, std::size_t r) { return scores[l] < scores[r]; });

  // Pool-adjacent-violators over blocks of (sum of scores, sum of correct, count); equal
  // scores start in one block so the map is a function of the score.
  struct Block {
    double score_sum;
    double correct_sum;
    double count;
  };
  std::vector<Block> blocks;
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = order[k];
    const Block next{scores[i], correct[i] ? 1.0 : 0.0, 1.0};
    if (!blocks.empty() && blocks.back().score_sum / blocks.back().count == scores[i]) {
      blocks.back().score_sum += next.score_sum;
      blocks.back().correct_sum += next.correct_sum;
      blocks.back().count += 1.0;
    } else {
      blocks.push_back(next);
    }
    while (blocks.size() >= 2) {
      const Block& last = blocks[blocks.size() - 1];
      const Block& prev = blocks[blocks.size() - 2];
      if (prev.correct_sum / prev.count <= last.correct_sum / last.count) break;
      const Block merged{prev.score_sum + last.score_sum, prev.correct_sum + last.correct_sum,
                         prev.count + last.count};
      blocks.pop_back();
      blocks.back() = merged;
    }
  }
  for (const Block& block : blocks) {
    const double x = block.score_sum / block.count;
    const double y = block.correct_sum / block.count;
    if (!map.x_.empty() && x <= map.x_.back()) {  // numerically equal means: keep the larger y
      map.y_.back() = std::max(map.y_.back(), y);
      continue;
    }
    map.x_.push_back(x);
    map.y_.push_back(y);
  }
  return map;
}

Result<IsotonicMap> IsotonicMap::from_points(std::vector<double> x, std::vector<double> y) {
  if (x.size() != y.size()) return Error{"model_invalid", "isotonic x and y differ in length"};
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i]) || y[i] < 0.0 || y[i] > 1.0) {
      return Error{"model_invalid", "isotonic point " + std::to_string(i) + " out of range"};
    }
    if (i > 0 && (x[i] <= x[i - 1] || y[i] < y[i - 1])) {
      return Error{"model_invalid", "isotonic points are not monotone at " + std::to_string(i)};
    }
  }
  IsotonicMap map;
  map.x_ = std::move(x);
  map.y_ = std::move(y);
  return map;
}

double IsotonicMap::operator()(double score) const {
  if (x_.empty()) return score;
  if (score <= x_.front()) return y_.front();
  if (score >= x_.back()) return y_.back();
  const auto upper = std::upper_bound(x_.begin(), x_.end(), score);
  const auto k = static_cast<std::size_t>(upper - x_.begin());
  const double t = (score - x_[k - 1]) / (x_[k] - x_[k - 1]);
  return y_[k - 1] + t * (y_[k] - y_[k - 1]);
}

std::string_view calibration_method_name(CalibrationMethod method) {
  switch (method) {
    case CalibrationMethod::kIdentity:
      return "identity";
    case CalibrationMethod::kTemperature:
      return "temperature";
    case CalibrationMethod::kIsotonic:
      return "isotonic";
  }
  return "unknown";
}

Calibrator Calibrator::temperature(double temperature) {
  Calibrator calibrator;
  calibrator.method_ = CalibrationMethod::kTemperature;
  calibrator.temperature_ = temperature;
  return calibrator;
}

Calibrator Calibrator::isotonic(double temperature, IsotonicMap map) {
  Calibrator calibrator;
  calibrator.method_ = CalibrationMethod::kIsotonic;
  calibrator.temperature_ = temperature;
  calibrator.isotonic_ = std::move(map);
  return calibrator;
}

CalibratedTop2 Calibrator::apply(std::span<const double> logits,
                                 std::vector<double>& scratch) const {
  CalibratedTop2 top;
  if (logits.empty()) return top;
  top.first = argmax(logits);
  for (std::size_t i = 0; i < logits.size(); ++i) {
    if (static_cast<int>(i) == top.first) continue;
    if (top.second < 0 || logits[i] > logits[static_cast<std::size_t>(top.second)]) {
      top.second = static_cast<int>(i);
    }
  }
  softmax(logits, 1.0, scratch);
  top.raw_probability = scratch[static_cast<std::size_t>(top.first)];
  if (method_ != CalibrationMethod::kIdentity) softmax(logits, temperature_, scratch);
  top.confidence = scratch[static_cast<std::size_t>(top.first)];
  top.second_confidence = top.second < 0 ? 0.0 : scratch[static_cast<std::size_t>(top.second)];
  if (method_ == CalibrationMethod::kIsotonic) {
    top.confidence = isotonic_(top.confidence);
    top.second_confidence = std::min(top.confidence, isotonic_(top.second_confidence));
  }
  return top;
}

CalibratedTop2 Calibrator::apply(std::span<const double> logits) const {
  std::vector<double> scratch;
  return apply(logits, scratch);
}

nlohmann::json Calibrator::to_json() const {
  nlohmann::json json = {{"method", std::string(calibration_method_name(method_))},
                         {"temperature", temperature_}};
  if (method_ == CalibrationMethod::kIsotonic) {
    json["isotonic"] = {{"x", isotonic_.x()}, {"y", isotonic_.y()}};
  }
  return json;
}

Result<Calibrator> Calibrator::from_json(const nlohmann::json& json, std::string_view source) {
  const auto fail = [&](std::string_view field, std::string_view why) {
    return model_field_invalid(std::filesystem::path(source), field, why);
  };
  if (!json.is_object()) return Error{"model_invalid", std::string(source) + ": not a JSON object"};
  if (!json.contains("method") || !json["method"].is_string()) {
    return fail("method", "missing or not a string");
  }
  if (!json.contains("temperature") || !json["temperature"].is_number()) {
    return fail("temperature", "missing or not a number");
  }
  const std::string method = json["method"].get<std::string>();
  const double temperature = json["temperature"].get<double>();
  if (!(temperature >= kMinTemperature && temperature <= kMaxTemperature)) {
    return fail("temperature", "out of range [0.05, 100]");
  }
  if (method == calibration_method_name(CalibrationMethod::kIdentity)) return Calibrator();
  if (method == calibration_method_name(CalibrationMethod::kTemperature)) {
    return Calibrator::temperature(temperature);
  }
  if (method == calibration_method_name(CalibrationMethod::kIsotonic)) {
    const auto it = json.find("isotonic");
    if (it == json.end() || !it->is_object() || !it->contains("x") || !it->contains("y") ||
        !(*it)["x"].is_array() || !(*it)["y"].is_array()) {
      return fail("isotonic", "missing x/y arrays");
    }
    std::vector<double> x;
    std::vector<double> y;
    for (const auto& v : (*it)["x"]) {
      if (!v.is_number()) return fail("isotonic.x", "not a number");
      x.push_back(v.get<double>());
    }
    for (const auto& v : (*it)["y"]) {
      if (!v.is_number()) return fail("isotonic.y", "not a number");
      y.push_back(v.get<double>());
    }
    auto map = IsotonicMap::from_points(std::move(x), std::move(y));
    if (!map) return fail("isotonic", map.error().message);
    return Calibrator::isotonic(temperature, std::move(map.value()));
  }
  return fail("method", "unknown value \"" + method + "\" (identity | temperature | isotonic)");
}

nlohmann::json CalibrationFit::to_json() const {
  nlohmann::json json = calibrator.to_json();
  json["fit"] = {{"examples", examples},
                 {"folds", folds},
                 {"accuracy", accuracy},
                 {"ece_before", ece_before},
                 {"ece_after", ece_after},
                 {"ece_after_measured", "cross-fitted (out-of-fold)"},
                 {"ece_identity_cv", ece_identity_cv},
                 {"ece_temperature_cv", ece_temperature_cv},
                 {"ece_isotonic_cv", ece_isotonic_cv},
                 {"bins", 10}};
  json["reliability_before"] = reliability_to_json(reliability_before);
  json["reliability_after"] = reliability_to_json(reliability_after);
  return json;
}

CalibrationFit fit_calibration(const std::vector<LabeledLogits>& examples, std::uint64_t seed) {
  CalibrationFit fit;
  fit.examples = examples.size();
  std::vector<std::size_t> all(examples.size());
  std::iota(all.begin(), all.end(), 0);
  {
    std::vector<double> raw;
    std::vector<bool> correct;
    score(Calibrator(), examples, all, raw, correct);
    fit.ece_before = expected_calibration_error(raw, correct);
    fit.reliability_before = reliability_table(raw, correct);
    fit.accuracy = correct.empty()
                       ? 0.0
                       : static_cast<double>(std::count(correct.begin(), correct.end(), true)) /
                             static_cast<double>(correct.size());
  }
  if (examples.size() < 4) {  // nothing to cross-fit on: keep the raw probabilities
    fit.ece_after = fit.ece_identity_cv = fit.ece_temperature_cv = fit.ece_before;
    fit.reliability_after = fit.reliability_before;
    return fit;
  }

  fit.folds = examples.size() >= 50 ? 5 : 2;
  std::vector<std::size_t> shuffled = all;
  std::mt19937_64 rng(seed);
  std::shuffle(shuffled.begin(), shuffled.end(), rng);

  std::vector<CalibrationMethod> candidates = {CalibrationMethod::kIdentity,
                                               CalibrationMethod::kTemperature};
  if (examples.size() >= kMinIsotonicExamples) candidates.push_back(CalibrationMethod::kIsotonic);

  CalibrationMethod best = CalibrationMethod::kIdentity;
  double best_ece = std::numeric_limits<double>::infinity();
  for (CalibrationMethod method : candidates) {
    std::vector<double> confidences;
    std::vector<bool> correct;
    for (int fold = 0; fold < fit.folds; ++fold) {
      std::vector<LabeledLogits> fit_part;
      std::vector<std::size_t> eval_part;
      for (std::size_t k = 0; k < shuffled.size(); ++k) {
        if (static_cast<int>(k % static_cast<std::size_t>(fit.folds)) == fold) {
          eval_part.push_back(shuffled[k]);
        } else {
          fit_part.push_back(examples[shuffled[k]]);
        }
      }
      score(fit_method(method, fit_part), examples, eval_part, confidences, correct);
    }
    const double ece = expected_calibration_error(confidences, correct);
    switch (method) {
      case CalibrationMethod::kIdentity:
        fit.ece_identity_cv = ece;
        break;
      case CalibrationMethod::kTemperature:
        fit.ece_temperature_cv = ece;
        break;
      case CalibrationMethod::kIsotonic:
        fit.ece_isotonic_cv = ece;
        break;
    }
    // Candidates go from simple to flexible; a more flexible one must be clearly better.
    if (ece < best_ece - 1e-4) {
      best_ece = ece;
      best = method;
      fit.reliability_after = reliability_table(confidences, correct);
    }
  }
  fit.ece_after = best_ece;
  fit.calibrator = fit_method(best, examples);
  return fit;
}

}  // namespace hengshi::edge
