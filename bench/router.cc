// bench_router: the whole edge/cloud routing decision on public data (../shared/data, its README).
//
// Per dataset: a stratified 80/20 split of the training file (seed 1); the intent model is trained
// on the 80% as `hengshi train` does, the confidence bands are fitted on the 20% as `hengshi
// calibrate` does (target precision 0.97, min support 20), and every dev/test row is routed by
// decide() with the embedded policy and those bands. Prints the share routed to the edge, the
// edge's precision, the out-of-scope leak to the edge, the cost against all-cloud, decide() latency
// next to predict() latency (ratio, same run), and the edge error rate per complexity score.
//
// Usage: bench_router [--data DIR] [--search-budget SECONDS] [--only kuake|banking77]
// DIR defaults to $HENGSHI_DATA_DIR, then to <source>/../shared/data. Without the data it prints
// "skip: dataset not found" and exits 0.
#include <stdlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/decision.h"
#include "edge/intent_dataset.h"
#include "edge/intent_engine.h"
#include "edge/intent_model.h"
#include "edge/intent_trainer.h"
#include "edge/model_manifest.h"
#include "edge/oos_score.h"
#include "router/calibrate.h"
#include "router/complexity.h"
#include "router/decide.h"
#include "router/router_policy.h"
#include "router/thresholds.h"

namespace fs = std::filesystem;
using hengshi::Decision;
using hengshi::edge::IntentEngine;
using hengshi::edge::IntentExample;
using hengshi::edge::IntentPrediction;
using hengshi::edge::kOutOfScopeIntent;

namespace {

constexpr double kTargetPrecision = 0.97;
constexpr std::size_t kMinSupport = 20;
constexpr double kCalibrateShare = 0.2;
// These sets have no answers: the prompt is the question plus system/framing tokens, the
// completion a fixed length.
constexpr int kFramingTokens = 20;
constexpr int kCompletionTokens = 60;
constexpr double kAimOosRecall = 0.90;
constexpr double kAimDecideP99Us = 50.0;
// CLINC150 (Larson et al. 2019), best in-scope accuracy and its out-of-scope recall (BERT,
// threshold on the softmax): a different dataset, printed for scale.
constexpr double kClincInScopeAccuracy = 0.962;
constexpr double kClincOosRecall = 0.523;

struct Dataset {
  std::string name;
  std::string train_file;
  std::string test_file;
};

struct Prices {
  double input_per_1k = 0;
  double output_per_1k = 0;
  double cost(int prompt_tokens, int completion_tokens) const {
    return prompt_tokens / 1000.0 * input_per_1k + completion_tokens / 1000.0 * output_per_1k;
  }
};

struct ComplexityRow {
  std::size_t rows = 0;
  std::size_t predicted_in_scope = 0;
  std::size_t wrong = 0;  // predicted in scope and predicted != truth
  double error_rate() const {
    return predicted_in_scope == 0 ? 0 : static_cast<double>(wrong) / predicted_in_scope;
  }
};

struct RouterRun {
  std::string name;
  std::size_t train_rows = 0;
  std::size_t calibrate_rows = 0;
  std::size_t dev_rows = 0;
  std::size_t dev_oos_rows = 0;
  double train_seconds = 0;
  double dev_accuracy = 0;  // top-1, out of scope counted as a label
  hengshi::router::Band default_band;
  std::size_t intent_bands = 0;
  std::vector<std::string> edge_never_intents;  // intent bands with high = kEdgeNever
  std::size_t inherited_groups = 0;
  double calibrate_edge_share = 0;  // decide() on the calibration split itself
  std::optional<double> calibrate_edge_precision;

  std::size_t edge_rows = 0;
  std::size_t edge_correct = 0;
  std::size_t oos_to_edge = 0;
  std::map<std::string, std::size_t> routes;
  std::map<std::string, std::size_t> reasons;
  std::map<std::string, std::size_t> leak_by_intent;  // predicted intent of a leaked __oos__ row
  std::size_t oos_predicted_in_scope = 0;             // true __oos__ the model called in scope
  double cost_routed = 0;
  double cost_routed_small = 0;  // the part of cost_routed sent to cloud-small
  double cost_routed_large = 0;
  double cost_all_small = 0;
  double cost_all_large = 0;
  std::array<ComplexityRow, 5> complexity{};

  double decide_p50_us = 0;
  double decide_p99_us = 0;
  double predict_p50_us = 0;
  double predict_p99_us = 0;

  double edge_share() const {
    return dev_rows == 0 ? 0 : static_cast<double>(edge_rows) / dev_rows;
  }
  std::optional<double> edge_precision() const {
    if (edge_rows == 0) return std::nullopt;
    return static_cast<double>(edge_correct) / edge_rows;
  }
  std::optional<double> oos_leak() const {
    if (dev_oos_rows == 0) return std::nullopt;
    return static_cast<double>(oos_to_edge) / dev_oos_rows;
  }
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
  return values[std::min(index, values.size() - 1)];
}

double micros_since(std::chrono::steady_clock::time_point start,
                    std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double, std::micro>(end - start).count();
}

// Stratified by intent: each intent gives round(share × n) rows to the calibration part, keeping
// at least one for training. File order is kept inside each part.
void stratified_split(const std::vector<IntentExample>& rows, double calibrate_share,
                      std::uint64_t seed, std::vector<IntentExample>& train,
                      std::vector<IntentExample>& calibrate) {
  std::map<std::string, std::vector<std::size_t>> by_intent;
  for (std::size_t i = 0; i < rows.size(); ++i) by_intent[rows[i].intent].push_back(i);
  std::mt19937_64 random(seed);
  std::vector<bool> to_calibrate(rows.size(), false);
  for (auto& [intent, indices] : by_intent) {
    std::shuffle(indices.begin(), indices.end(), random);
    std::size_t take =
        static_cast<std::size_t>(calibrate_share * static_cast<double>(indices.size()) + 0.5);
    if (indices.size() > 1) take = std::min(take, indices.size() - 1);
    for (std::size_t k = 0; k < take && k < indices.size(); ++k) to_calibrate[indices[k]] = true;
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    (to_calibrate[i] ? calibrate : train).push_back(rows[i]);
  }
}

// The datasets carry no answers; every in-scope row gets "answer for <intent>" (data README).
fs::path write_training_file(const fs::path& path, const std::vector<IntentExample>& rows) {
  std::ofstream out(path);
  for (const IntentExample& row : rows) {
    nlohmann::json json{{"text", row.text}, {"intent", row.intent}};
    if (row.intent != kOutOfScopeIntent) json["answer"] = "answer for " + row.intent;
    out << json.dump() << "\n";
  }
  return path;
}

std::optional<Prices> pool_prices(const hengshi::Config& config, const std::string& pool_name) {
  const hengshi::PoolConfig* pool = config.find_pool(pool_name);
  if (pool == nullptr || pool->members.empty()) return std::nullopt;
  // A pool's members may be priced differently; the embedded defaults have one member each.
  return Prices{pool->members.front().price_input_per_1k,
                pool->members.front().price_output_per_1k};
}

struct PoolPrices {
  Prices small;
  Prices large;
};

hengshi::router::RouteInput route_input_for(const std::string& text,
                                            const IntentPrediction& prediction) {
  hengshi::router::RouteInput input;
  input.model = "auto";
  input.texts = {text};
  input.last_user_text = text;
  input.turns = 1;
  input.task_type = "faq";
  input.input_tokens = hengshi::router::approx_token_count(text) + 4;  // + role and framing
  input.prediction = &prediction;
  input.llm_available = false;
  input.default_pool = "cloud-small";
  input.pools = {"cloud-small", "cloud-large"};
  return input;
}

// Edge share and precision on the calibration split itself: the bands' in-sample figures, to set
// against the dev figures.
std::pair<double, std::optional<double>> in_sample_edge(const IntentEngine& engine,
                                                        const std::vector<IntentExample>& rows,
                                                        const hengshi::router::RouterPolicy& policy,
                                                        hengshi::router::RouterRuntime& runtime) {
  std::size_t edge = 0;
  std::size_t correct = 0;
  for (const IntentExample& row : rows) {
    const IntentPrediction prediction = engine.predict(row.text);
    const Decision decision =
        hengshi::router::decide(route_input_for(row.text, prediction), policy, runtime);
    if (decision.route != hengshi::Route::edge) continue;
    ++edge;
    correct += row.intent != kOutOfScopeIntent && prediction.intent == row.intent ? 1 : 0;
  }
  const double share = rows.empty() ? 0 : static_cast<double>(edge) / rows.size();
  if (edge == 0) return {share, std::nullopt};
  return {share, static_cast<double>(correct) / edge};
}

std::optional<RouterRun> run(const Dataset& dataset, const fs::path& data_dir, const fs::path& work,
                             double search_budget_s, const PoolPrices& prices) {
  namespace router = hengshi::router;
  auto train_file_rows = hengshi::edge::read_intent_examples(data_dir / dataset.train_file);
  auto dev_rows = hengshi::edge::read_intent_examples(data_dir / dataset.test_file);
  if (!train_file_rows || !dev_rows) {
    std::fprintf(stderr, "%s: cannot read: %s\n", dataset.name.c_str(),
                 (!train_file_rows ? train_file_rows.error() : dev_rows.error()).message.c_str());
    return std::nullopt;
  }
  RouterRun result;
  result.name = dataset.name;
  std::vector<IntentExample> train_rows;
  std::vector<IntentExample> calibrate_rows;
  stratified_split(*train_file_rows, kCalibrateShare, /*seed=*/1, train_rows, calibrate_rows);
  result.train_rows = train_rows.size();
  result.calibrate_rows = calibrate_rows.size();

  hengshi::edge::TrainOptions options;
  options.data_path = write_training_file(work / (dataset.name + "-train.jsonl"), train_rows);
  options.out_dir = work / (dataset.name + "-model");
  options.autotune_budget_s = search_budget_s;
  auto report = hengshi::edge::train_intent_model(options);
  if (!report) {
    std::fprintf(stderr, "%s: training failed: %s\n", dataset.name.c_str(),
                 report.error().message.c_str());
    return std::nullopt;
  }
  result.train_seconds = report->total_seconds;
  auto loaded = IntentEngine::load(report->out_dir);
  if (!loaded) {
    std::fprintf(stderr, "%s: load failed: %s\n", dataset.name.c_str(),
                 loaded.error().message.c_str());
    return std::nullopt;
  }
  const IntentEngine& engine = **loaded;

  std::vector<router::CalibrationRow> calibration;
  calibration.reserve(calibrate_rows.size());
  for (const IntentExample& row : calibrate_rows) calibration.push_back({row.text, row.intent, ""});
  router::CalibrateOptions calibrate_options;
  calibrate_options.target_precision = kTargetPrecision;
  calibrate_options.min_support = kMinSupport;
  auto fitted = router::calibrate_thresholds(engine, calibration, calibrate_options);
  if (!fitted) {
    std::fprintf(stderr, "%s: calibration failed: %s\n", dataset.name.c_str(),
                 fitted.error().message.c_str());
    return std::nullopt;
  }
  result.default_band = fitted->file.default_band;
  result.intent_bands = fitted->file.intents.size();
  for (const auto& [intent, band] : fitted->file.intents) {
    if (band.high >= router::kEdgeNever) result.edge_never_intents.push_back(intent);
  }
  result.inherited_groups = fitted->inherited.size();
  const fs::path thresholds_path = work / (dataset.name + "-thresholds.json");
  if (auto written = router::write_thresholds_file(fitted->file, thresholds_path.string());
      !written) {
    std::fprintf(stderr, "%s: %s\n", dataset.name.c_str(), written.error().message.c_str());
    return std::nullopt;
  }
  auto policy = router::load_router_policy("", thresholds_path.string());
  if (!policy) {
    std::fprintf(stderr, "%s: policy: %s\n", dataset.name.c_str(), policy.error().message.c_str());
    return std::nullopt;
  }
  router::RouterRuntime runtime(**policy);
  std::tie(result.calibrate_edge_share, result.calibrate_edge_precision) =
      in_sample_edge(engine, calibrate_rows, **policy, runtime);

  // Predictions first, outside decide()'s timing: one warm-up pass, one timed pass.
  const std::vector<IntentExample>& dev = *dev_rows;
  result.dev_rows = dev.size();
  std::vector<IntentPrediction> predictions;
  predictions.reserve(dev.size());
  for (const IntentExample& row : dev) predictions.push_back(engine.predict(row.text));
  std::vector<double> predict_us;
  predict_us.reserve(dev.size());
  for (const IntentExample& row : dev) {
    const auto start = std::chrono::steady_clock::now();
    const IntentPrediction prediction = engine.predict(row.text);
    predict_us.push_back(micros_since(start, std::chrono::steady_clock::now()));
  }

  std::vector<router::RouteInput> inputs;
  inputs.reserve(dev.size());
  for (std::size_t i = 0; i < dev.size(); ++i) {
    inputs.push_back(route_input_for(dev[i].text, predictions[i]));
  }
  // No session ids, so both passes decide the same; the second is timed, warm.
  std::vector<Decision> decisions;
  decisions.reserve(dev.size());
  for (const router::RouteInput& input : inputs) {
    decisions.push_back(router::decide(input, **policy, runtime));
  }
  std::vector<double> decide_us;
  decide_us.reserve(dev.size());
  for (const router::RouteInput& input : inputs) {
    const auto start = std::chrono::steady_clock::now();
    const Decision decision = router::decide(input, **policy, runtime);
    decide_us.push_back(micros_since(start, std::chrono::steady_clock::now()));
  }
  result.decide_p50_us = percentile(decide_us, 0.50);
  result.decide_p99_us = percentile(decide_us, 0.99);
  result.predict_p50_us = percentile(predict_us, 0.50);
  result.predict_p99_us = percentile(predict_us, 0.99);

  std::size_t top1_right = 0;
  for (std::size_t i = 0; i < dev.size(); ++i) {
    const std::string& truth = dev[i].intent;
    const IntentPrediction& prediction = predictions[i];
    const Decision& decision = decisions[i];
    const bool true_oos = truth == kOutOfScopeIntent;
    top1_right += prediction.intent == truth ? 1 : 0;
    result.dev_oos_rows += true_oos ? 1 : 0;
    if (true_oos && !prediction.is_oos) ++result.oos_predicted_in_scope;
    ++result.routes[std::string(hengshi::to_string(decision.route))];
    ++result.reasons[std::string(hengshi::to_string(decision.reason))];

    const int prompt_tokens = router::approx_token_count(dev[i].text) + kFramingTokens;
    const double small = prices.small.cost(prompt_tokens, kCompletionTokens);
    const double large = prices.large.cost(prompt_tokens, kCompletionTokens);
    result.cost_all_small += small;
    result.cost_all_large += large;
    if (decision.route == hengshi::Route::cloud_small) result.cost_routed_small += small;
    if (decision.route == hengshi::Route::cloud_large) result.cost_routed_large += large;
    if (decision.route == hengshi::Route::edge) {
      ++result.edge_rows;
      result.edge_correct += !true_oos && prediction.intent == truth ? 1 : 0;
      if (true_oos) {
        ++result.oos_to_edge;
        ++result.leak_by_intent[prediction.intent];
      }
    }

    const int score = router::complexity_score(router::complexity_features(dev[i].text, 1));
    ComplexityRow& bucket =
        result.complexity[static_cast<std::size_t>(std::clamp(score, 1, 5) - 1)];
    ++bucket.rows;
    if (!prediction.is_oos) {
      ++bucket.predicted_in_scope;
      bucket.wrong += prediction.intent != truth ? 1 : 0;
    }
  }
  result.cost_routed = result.cost_routed_small + result.cost_routed_large;
  result.dev_accuracy = dev.empty() ? 0 : static_cast<double>(top1_right) / dev.size();
  return result;
}

std::string format_optional(std::optional<double> value, const char* format) {
  if (!value) return "n/a";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, format, *value);
  return buffer;
}

void print_histogram(const char* title, const std::map<std::string, std::size_t>& counts,
                     std::size_t total) {
  std::printf("  %s:", title);
  for (const auto& [key, count] : counts) {
    std::printf(" %s %zu (%.1f%%)", key.c_str(), count,
                total == 0 ? 0.0 : 100.0 * static_cast<double>(count) / total);
  }
  std::printf("\n");
}

void print_details(const RouterRun& r) {
  std::printf("\n%s: train %zu rows, calibrate %zu rows (stratified 80/20, seed 1), dev %zu rows",
              r.name.c_str(), r.train_rows, r.calibrate_rows, r.dev_rows);
  std::printf(" (%zu __oos__); trained in %.1f s; dev top-1 accuracy %.3f\n", r.dev_oos_rows,
              r.train_seconds, r.dev_accuracy);
  std::printf(
      "  bands at precision %.2f: default high %.3f low %.3f; %zu intent bands (%zu edge never), "
      "%zu groups inherited\n",
      kTargetPrecision, r.default_band.high, r.default_band.low, r.intent_bands,
      r.edge_never_intents.size(), r.inherited_groups);
  std::printf("  on the calibration split itself: edge share %.3f, edge precision %s\n",
              r.calibrate_edge_share, format_optional(r.calibrate_edge_precision, "%.3f").c_str());
  if (!r.edge_never_intents.empty()) {
    std::printf("  edge never:");
    for (const std::string& intent : r.edge_never_intents) std::printf(" %s", intent.c_str());
    std::printf("\n");
  }
  print_histogram("routes", r.routes, r.dev_rows);
  print_histogram("reasons", r.reasons, r.dev_rows);
  std::printf(
      "  routed cost: cloud-small %.4f + cloud-large %.4f = %.4f (all cloud-small %.4f, "
      "all cloud-large %.4f)\n",
      r.cost_routed_small, r.cost_routed_large, r.cost_routed, r.cost_all_small, r.cost_all_large);
  if (r.dev_oos_rows > 0) {
    std::printf(
        "  __oos__ rows: %zu; the model called %zu of them in scope (%.1f%%), %zu went to the "
        "edge",
        r.dev_oos_rows, r.oos_predicted_in_scope,
        100.0 * static_cast<double>(r.oos_predicted_in_scope) / r.dev_oos_rows, r.oos_to_edge);
    if (!r.leak_by_intent.empty()) {
      std::printf(", answered as:");
      for (const auto& [intent, count] : r.leak_by_intent) {
        std::printf(" %s %zu", intent.c_str(), count);
      }
    }
    std::printf("\n");
  }
  std::printf("  complexity score: dev rows, edge error rate among rows predicted in scope\n");
  std::printf("    %5s %6s %10s %10s\n", "score", "rows", "in scope", "error");
  std::optional<double> previous;
  bool monotone = true;
  for (std::size_t s = 0; s < r.complexity.size(); ++s) {
    const ComplexityRow& row = r.complexity[s];
    std::printf(
        "    %5zu %6zu %10zu %10s\n", s + 1, row.rows, row.predicted_in_scope,
        row.predicted_in_scope == 0 ? "-" : format_optional(row.error_rate(), "%.3f").c_str());
    if (row.predicted_in_scope < kMinSupport) continue;  // too few rows to order
    if (previous && row.error_rate() < *previous) monotone = false;
    previous = row.error_rate();
  }
  std::printf("    error non-decreasing in score (scores with >= %zu in-scope predictions): %s\n",
              kMinSupport, monotone ? "yes" : "no");
}

// ---- Open-intent protocol (issue 10) ----
// Zhang, Xu & Lin, "Deep Open Intent Classification with Adaptive Decision Boundary" (AAAI 2021):
// train on a share of the intents, the rest are out of scope; an unanswered row counts as
// predicted out of scope. Three policies decide the edge on the same model and rows.

constexpr std::array<double, 3> kOosShares = {0.10, 0.20, 0.30};
constexpr double kGlobalSoftmaxThreshold = 0.9;
constexpr double kAimMaxLeak = 0.03;
constexpr double kAimEdgeShareRatio = 1.2;
// ADB (BERT) on BANKING with 50% known intents, accuracy; printed for scale.
constexpr double kAdbBanking50Accuracy = 0.865;
constexpr std::array<std::uint64_t, 3> kDrawSeeds = {11, 22, 33};

// The last two are not policies but bounds: the one global threshold, chosen on the test rows
// themselves at each out-of-scope share, that gives the largest edge share with precision and
// leak within the targets. No calibration on other rows can do better with that score and one
// threshold, so they say whether a missed target is calibration's fault or the score's.
// kOosScoreAtShare calibrates for each setting's out-of-scope share with the leak capped at the
// aim (`calibrate --oos-share S --max-oos-leak 0.03`; banking77's calibration rows have no
// out-of-scope ones, so the model's stand-ins serve).
enum class EdgePolicy {
  kGlobalSoftmax,
  kTodaysCalibrate,
  kOosScore,
  kOosScoreAtShare,
  kBestSoftmaxThreshold,
  kBestOosScoreThreshold
};
constexpr std::array<EdgePolicy, 6> kEdgePolicies = {
    EdgePolicy::kGlobalSoftmax,        EdgePolicy::kTodaysCalibrate,
    EdgePolicy::kOosScore,             EdgePolicy::kOosScoreAtShare,
    EdgePolicy::kBestSoftmaxThreshold, EdgePolicy::kBestOosScoreThreshold};
// The policies the targets are checked for.
constexpr std::array<EdgePolicy, 2> kTargetPolicies = {EdgePolicy::kOosScore,
                                                       EdgePolicy::kOosScoreAtShare};

const char* policy_name(EdgePolicy policy) {
  switch (policy) {
    case EdgePolicy::kGlobalSoftmax:
      return "softmax>=0.9";
    case EdgePolicy::kTodaysCalibrate:
      return "today's calibrate";
    case EdgePolicy::kOosScore:
      return "oos score";
    case EdgePolicy::kOosScoreAtShare:
      return "oos @share,leak";
    case EdgePolicy::kBestSoftmaxThreshold:
      return "bound: softmax";
    case EdgePolicy::kBestOosScoreThreshold:
      return "bound: oos score";
  }
  return "?";
}

// "Today's calibrate": the per-group rule calibrate had before hierarchical bands (issue 10).
hengshi::router::CalibrateOptions todays_calibrate_options() {
  hengshi::router::CalibrateOptions options;
  options.target_precision = kTargetPrecision;
  options.min_support = kMinSupport;
  options.rule = hengshi::router::ThresholdRule::per_group_legacy;
  return options;
}
// The calibrate the out-of-scope policy runs with: whatever `hengshi calibrate` does by default.
hengshi::router::CalibrateOptions current_calibrate_options() {
  hengshi::router::CalibrateOptions options;
  options.target_precision = kTargetPrecision;
  options.min_support = kMinSupport;
  return options;
}

struct ShareMetrics {
  double edge_share = 0;
  std::optional<double> edge_precision;
  double leak = 0;      // share of out-of-scope rows answered by the edge
  double coverage = 0;  // share of in-scope rows answered by the edge
  double accuracy = 0;  // open-intent protocol
  double macro_f1 = 0;
};

struct OpenIntentRun {
  std::string name;
  std::string group;  // settings averaged together in the summary
  std::size_t known_intents = 0;
  std::size_t test_in_scope = 0;
  std::size_t test_oos = 0;
  std::map<std::string, double> auroc;     // feature → AUROC on the test rows (in scope vs not)
  std::vector<std::string> kept_features;  // the ones the served score combines
  std::map<EdgePolicy, std::array<ShareMetrics, kOosShares.size()>> metrics;
  double predict_p99_us = 0;         // with the out-of-scope score
  double predict_p99_legacy_us = 0;  // the same model without it
};

// A copy of a model directory as a model trained before the out-of-scope score: no score files,
// a manifest that does not list them (the engine's fallback).
bool write_legacy_copy(const fs::path& dir, const fs::path& legacy) {
  std::error_code ec;
  fs::remove_all(legacy, ec);
  fs::copy(dir, legacy, fs::copy_options::recursive, ec);
  if (ec) return false;
  auto manifest = hengshi::edge::load_verified_manifest(legacy);
  if (!manifest) return false;
  std::erase_if(manifest->files, [](const hengshi::edge::ManifestFile& f) {
    return f.name == hengshi::edge::kOosScoreFile || f.name == hengshi::edge::kOosNeighboursFile;
  });
  manifest->holdout_metrics.erase("oos_score");
  fs::remove(legacy / hengshi::edge::kOosScoreFile, ec);
  fs::remove(legacy / hengshi::edge::kOosNeighboursFile, ec);
  return static_cast<bool>(hengshi::edge::write_manifest(legacy, *manifest));
}

// Edge decisions of a calibrated policy: bands fitted on `calibrate_rows`, then decide().
std::optional<std::vector<bool>> calibrated_edge(const IntentEngine& engine,
                                                 const std::vector<IntentExample>& calibrate_rows,
                                                 const std::vector<IntentExample>& test,
                                                 const std::vector<IntentPrediction>& predictions,
                                                 const hengshi::router::CalibrateOptions& options,
                                                 const fs::path& thresholds_path) {
  namespace router = hengshi::router;
  std::vector<router::CalibrationRow> calibration;
  for (const IntentExample& row : calibrate_rows) calibration.push_back({row.text, row.intent, ""});
  auto fitted = router::calibrate_thresholds(engine, calibration, options);
  if (!fitted) {
    std::fprintf(stderr, "calibration failed: %s\n", fitted.error().message.c_str());
    return std::nullopt;
  }
  if (auto written = router::write_thresholds_file(fitted->file, thresholds_path.string());
      !written) {
    std::fprintf(stderr, "%s\n", written.error().message.c_str());
    return std::nullopt;
  }
  auto policy = router::load_router_policy("", thresholds_path.string());
  if (!policy) {
    std::fprintf(stderr, "policy: %s\n", policy.error().message.c_str());
    return std::nullopt;
  }
  router::RouterRuntime runtime(**policy);
  std::vector<bool> edge(test.size());
  for (std::size_t i = 0; i < test.size(); ++i) {
    edge[i] =
        router::decide(route_input_for(test[i].text, predictions[i]), **policy, runtime).route ==
        hengshi::Route::edge;
  }
  return edge;
}

// The test rows counted by scope, and the weight that makes the out-of-scope ones `oos_share`
// of the traffic (in-scope rows weigh 1).
struct TrafficMix {
  std::size_t in_scope = 0;
  std::size_t oos = 0;
  double oos_weight = 0;
};
TrafficMix traffic_mix(const std::vector<IntentExample>& test, double oos_share) {
  TrafficMix mix;
  for (const IntentExample& row : test) mix.in_scope += row.intent != kOutOfScopeIntent ? 1 : 0;
  mix.oos = test.size() - mix.in_scope;
  mix.oos_weight = mix.oos == 0 ? 0
                                : oos_share / (1 - oos_share) *
                                      static_cast<double>(mix.in_scope) /
                                      static_cast<double>(mix.oos);
  return mix;
}

// Metrics with the out-of-scope rows weighted to `oos_share` of the traffic.
ShareMetrics share_metrics(const std::vector<IntentExample>& test,
                           const std::vector<IntentPrediction>& predictions,
                           const std::vector<bool>& edge, double oos_share) {
  const auto [in_scope, oos, oos_weight] = traffic_mix(test, oos_share);
  double total = 0, edge_weight = 0, edge_right = 0, right = 0;
  std::size_t oos_edge = 0, in_scope_edge = 0;
  // Open-intent classes: every true or predicted label, __oos__ included.
  std::map<std::string, std::array<double, 3>> counts;  // tp, fp, fn
  for (std::size_t i = 0; i < test.size(); ++i) {
    const bool true_oos = test[i].intent == kOutOfScopeIntent;
    const double w = true_oos ? oos_weight : 1.0;
    const std::string predicted = edge[i] ? predictions[i].intent : std::string(kOutOfScopeIntent);
    total += w;
    if (edge[i]) {
      edge_weight += w;
      edge_right += !true_oos && predicted == test[i].intent ? w : 0;
      (true_oos ? oos_edge : in_scope_edge) += 1;
    }
    if (predicted == test[i].intent) {
      right += w;
      counts[predicted][0] += w;
    } else {
      counts[predicted][1] += w;
      counts[test[i].intent][2] += w;
    }
  }
  ShareMetrics m;
  m.edge_share = total == 0 ? 0 : edge_weight / total;
  if (edge_weight > 0) m.edge_precision = edge_right / edge_weight;
  m.leak = oos == 0 ? 0 : static_cast<double>(oos_edge) / oos;
  m.coverage = in_scope == 0 ? 0 : static_cast<double>(in_scope_edge) / in_scope;
  m.accuracy = total == 0 ? 0 : right / total;
  double f1_sum = 0;
  for (const auto& [label, c] : counts) {
    const double denominator = 2 * c[0] + c[1] + c[2];
    f1_sum += denominator == 0 ? 0 : 2 * c[0] / denominator;
  }
  m.macro_f1 = counts.empty() ? 0 : f1_sum / static_cast<double>(counts.size());
  return m;
}

// The bound rows: over every global threshold on `score`, the edge decisions with the largest
// weighted edge share whose precision is >= the target and whose leak is <= the aim, at
// `oos_share` (nothing answered when no threshold qualifies).
std::vector<bool> best_threshold_edge(const std::vector<IntentExample>& test,
                                      const std::vector<IntentPrediction>& predictions,
                                      const std::vector<double>& score, double oos_share) {
  const auto [in_scope, oos, oos_weight] = traffic_mix(test, oos_share);
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < test.size(); ++i) {
    if (!predictions[i].is_oos && !predictions[i].answer.empty()) order.push_back(i);
  }
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return score[a] > score[b]; });
  double answered = 0, right = 0;
  std::size_t leaked = 0, best_count = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const IntentExample& row = test[order[k]];
    const bool true_oos = row.intent == kOutOfScopeIntent;
    answered += true_oos ? oos_weight : 1.0;
    right += !true_oos && predictions[order[k]].intent == row.intent ? 1.0 : 0.0;
    leaked += true_oos ? 1 : 0;
    // A cut only between different scores: a threshold cannot split ties.
    if (k + 1 < order.size() && score[order[k + 1]] == score[order[k]]) continue;
    const double leak = oos == 0 ? 0 : static_cast<double>(leaked) / static_cast<double>(oos);
    if (right / answered >= kTargetPrecision && leak <= kAimMaxLeak) best_count = k + 1;
  }
  std::vector<bool> edge(test.size(), false);
  for (std::size_t k = 0; k < best_count; ++k) edge[order[k]] = true;
  return edge;
}

// Candidates that need models of their own, measured here rather than served: fastText
// one-vs-all (`-loss ova`, the largest independent sigmoid) and the agreement of a second,
// differently seeded and featured softmax model with the served one. AUROCs over the rows with
// usable tokens, in the order `positive` was filled.
void measure_model_candidates(const std::vector<IntentExample>& train_rows,
                              const std::vector<IntentExample>& test,
                              const hengshi::edge::FastTextParams& params,
                              const IntentEngine& engine,
                              const std::vector<IntentPrediction>& predictions,
                              const std::vector<bool>& positive, const fs::path& file,
                              std::map<std::string, double>& auroc) {
  const hengshi::edge::TextNormalizer& normalizer = engine.normalizer();
  {
    std::ofstream out(file);
    for (const IntentExample& row : train_rows) {
      out << "__label__" << row.intent << ' ' << normalizer.to_model_input(row.text) << '\n';
    }
  }
  hengshi::edge::FastTextParams ova_params = params;
  ova_params.one_vs_all = true;
  hengshi::edge::FastTextParams second_params = params;
  second_params.seed = params.seed + 1;
  second_params.minn = params.minn > 0 ? 0 : 3;  // the other sub-word setting
  second_params.maxn = params.minn > 0 ? 0 : 6;
  auto ova = hengshi::edge::IntentModel::train(file, ova_params);
  auto second = hengshi::edge::IntentModel::train(file, second_params);
  std::error_code ec;
  fs::remove(file, ec);
  if (!ova || !second) return;
  std::vector<double> ova_max, agreement;
  std::vector<double> logits;
  for (std::size_t i = 0; i < test.size(); ++i) {
    const std::string input = normalizer.to_model_input(test[i].text);
    if (input.empty()) continue;
    (*ova)->logits(input, logits);
    const double top = *std::max_element(logits.begin(), logits.end());
    ova_max.push_back(1.0 / (1.0 + std::exp(-top)));
    (*second)->logits(input, logits);
    const auto best =
        static_cast<std::size_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    // Agreement, ranked by the served model's probability among agreeing pairs.
    agreement.push_back((*second)->labels()[best] == predictions[i].intent
                            ? 1.0 + predictions[i].raw_probability
                            : predictions[i].raw_probability);
  }
  if (ova_max.size() != positive.size()) return;
  auroc["ova_max_sigmoid"] = hengshi::edge::auroc(ova_max, positive);
  auroc["ensemble_agreement"] = hengshi::edge::auroc(agreement, positive);
}

// One setting: train on `train_rows` (80%, the rest calibrates, as bench_router's main run),
// test on `test` whose unknown rows are labelled __oos__.
std::optional<OpenIntentRun> run_open_intent(const std::string& name, const std::string& group,
                                             const std::vector<IntentExample>& train_file_rows,
                                             std::vector<IntentExample> test, const fs::path& work,
                                             double search_budget_s, double assumed_oos_share) {
  OpenIntentRun result;
  result.name = name;
  result.group = group;
  std::vector<IntentExample> train_rows;
  std::vector<IntentExample> calibrate_rows;
  stratified_split(train_file_rows, kCalibrateShare, /*seed=*/1, train_rows, calibrate_rows);
  std::set<std::string> known;
  for (const IntentExample& row : train_rows) {
    if (row.intent != kOutOfScopeIntent) known.insert(row.intent);
  }
  result.known_intents = known.size();
  for (IntentExample& row : test) {
    if (!known.contains(row.intent)) row.intent = std::string(kOutOfScopeIntent);
    (row.intent == kOutOfScopeIntent ? result.test_oos : result.test_in_scope) += 1;
  }

  hengshi::edge::TrainOptions options;
  options.data_path = write_training_file(work / (name + "-train.jsonl"), train_rows);
  options.out_dir = work / (name + "-model");
  options.autotune_budget_s = search_budget_s;
  options.assumed_oos_share = assumed_oos_share;
  auto report = hengshi::edge::train_intent_model(options);
  if (!report) {
    std::fprintf(stderr, "%s: training failed: %s\n", name.c_str(), report.error().message.c_str());
    return std::nullopt;
  }
  const fs::path legacy_dir = work / (name + "-model-legacy");
  if (!write_legacy_copy(report->out_dir, legacy_dir)) {
    std::fprintf(stderr, "%s: cannot write the legacy copy\n", name.c_str());
    return std::nullopt;
  }
  auto engine = IntentEngine::load(report->out_dir);
  auto legacy = IntentEngine::load(legacy_dir);
  if (!engine || !legacy) {
    std::fprintf(stderr, "%s: load failed: %s\n", name.c_str(),
                 (!engine ? engine.error() : legacy.error()).message.c_str());
    return std::nullopt;
  }

  std::vector<IntentPrediction> predictions;
  std::vector<IntentPrediction> legacy_predictions;
  for (const IntentExample& row : test) {
    predictions.push_back((*engine)->predict(row.text));
    legacy_predictions.push_back((*legacy)->predict(row.text));
  }
  std::vector<double> predict_us;
  std::vector<double> legacy_us;
  for (const IntentExample& row : test) {
    auto start = std::chrono::steady_clock::now();
    const IntentPrediction p = (*engine)->predict(row.text);
    predict_us.push_back(micros_since(start, std::chrono::steady_clock::now()));
    start = std::chrono::steady_clock::now();
    const IntentPrediction q = (*legacy)->predict(row.text);
    legacy_us.push_back(micros_since(start, std::chrono::steady_clock::now()));
  }
  result.predict_p99_us = percentile(predict_us, 0.99);
  result.predict_p99_legacy_us = percentile(legacy_us, 0.99);

  // AUROC of in scope vs out of scope for each candidate feature and for the combination.
  std::vector<bool> positive;
  std::vector<std::vector<double>> features(hengshi::edge::kOosFeatureCount);
  std::vector<double> combined, product;
  for (std::size_t i = 0; i < test.size(); ++i) {
    const auto f = (*engine)->oos_features(test[i].text);
    if (!f) continue;
    positive.push_back(test[i].intent != kOutOfScopeIntent);
    for (std::size_t k = 0; k < f->size(); ++k) features[k].push_back((*f)[k]);
    combined.push_back(predictions[i].in_scope);
    product.push_back(predictions[i].confidence);
  }
  for (std::size_t k = 0; k < features.size(); ++k) {
    result.auroc[std::string(hengshi::edge::oos_feature_name(
        static_cast<hengshi::edge::OosFeature>(k)))] = hengshi::edge::auroc(features[k], positive);
  }
  if (const hengshi::edge::OosScorer* scorer = (*engine)->oos_scorer()) {
    for (hengshi::edge::OosFeature f : scorer->kept_features()) {
      result.kept_features.emplace_back(hengshi::edge::oos_feature_name(f));
    }
  }
  result.auroc["in_scope (combined)"] = hengshi::edge::auroc(combined, positive);
  result.auroc["confidence (x intent)"] = hengshi::edge::auroc(product, positive);

  measure_model_candidates(train_rows, test, report->params, **engine, predictions, positive,
                           work / (name + "-candidates.txt"), result.auroc);

  std::map<EdgePolicy, std::vector<bool>> edge;
  {
    std::vector<bool>& softmax = edge[EdgePolicy::kGlobalSoftmax];
    for (const IntentPrediction& p : legacy_predictions) {
      softmax.push_back(!p.is_oos && !p.answer.empty() &&
                        p.raw_probability >= kGlobalSoftmaxThreshold);
    }
  }
  auto today = calibrated_edge(**legacy, calibrate_rows, test, legacy_predictions,
                               todays_calibrate_options(), work / (name + "-today.json"));
  auto scored = calibrated_edge(**engine, calibrate_rows, test, predictions,
                                current_calibrate_options(), work / (name + "-oos.json"));
  if (!today || !scored) return std::nullopt;
  edge[EdgePolicy::kTodaysCalibrate] = std::move(*today);
  edge[EdgePolicy::kOosScore] = std::move(*scored);
  std::vector<double> softmax_score, oos_score;
  for (const IntentPrediction& p : legacy_predictions) softmax_score.push_back(p.raw_probability);
  for (const IntentPrediction& p : predictions) oos_score.push_back(p.confidence);
  std::array<std::vector<bool>, kOosShares.size()> at_share;
  for (std::size_t s = 0; s < kOosShares.size(); ++s) {
    hengshi::router::CalibrateOptions options = current_calibrate_options();
    options.oos_share = kOosShares[s];
    options.max_oos_leak = kAimMaxLeak;
    auto fitted = calibrated_edge(**engine, calibrate_rows, test, predictions, options,
                                  work / (name + "-oos-share.json"));
    if (!fitted) return std::nullopt;
    at_share[s] = std::move(*fitted);
  }
  for (EdgePolicy policy : kEdgePolicies) {
    const bool scored_model = policy == EdgePolicy::kOosScore ||
                              policy == EdgePolicy::kOosScoreAtShare ||
                              policy == EdgePolicy::kBestOosScoreThreshold;
    const std::vector<IntentPrediction>& used = scored_model ? predictions : legacy_predictions;
    for (std::size_t s = 0; s < kOosShares.size(); ++s) {
      if (policy == EdgePolicy::kBestSoftmaxThreshold || policy == EdgePolicy::kBestOosScoreThreshold) {
        edge[policy] = best_threshold_edge(test, used, scored_model ? oos_score : softmax_score,
                                           kOosShares[s]);
      }
      if (policy == EdgePolicy::kOosScoreAtShare) edge[policy] = at_share[s];
      result.metrics[policy][s] = share_metrics(test, used, edge[policy], kOosShares[s]);
    }
  }
  std::error_code ec;
  fs::remove_all(report->out_dir, ec);
  fs::remove_all(legacy_dir, ec);
  return result;
}

void print_open_intent(const OpenIntentRun& r) {
  std::printf("\n%s: %zu known intents; test %zu in scope + %zu out of scope\n", r.name.c_str(),
              r.known_intents, r.test_in_scope, r.test_oos);
  std::printf("  out-of-scope score combines:");
  for (const std::string& feature : r.kept_features) std::printf(" %s", feature.c_str());
  std::printf("\n  AUROC in scope vs out of scope (test rows):");
  for (const auto& [feature, value] : r.auroc) std::printf(" %s %.3f;", feature.c_str(), value);
  std::printf("\n  predict p99: %.1f us with the score, %.1f us without (x%.2f)\n",
              r.predict_p99_us, r.predict_p99_legacy_us,
              r.predict_p99_legacy_us > 0 ? r.predict_p99_us / r.predict_p99_legacy_us : 0.0);
  std::printf("  %-18s %5s %6s %7s %6s %6s %6s %6s\n", "policy", "oos", "edge", "edge", "oos",
              "cover", "open", "open");
  std::printf("  %-18s %5s %6s %7s %6s %6s %6s %6s\n", "", "share", "share", "prec", "leak", "age",
              "acc", "macF1");
  for (EdgePolicy policy : kEdgePolicies) {
    for (std::size_t s = 0; s < kOosShares.size(); ++s) {
      const ShareMetrics& m = r.metrics.at(policy)[s];
      std::printf("  %-18s %5.2f %6.3f %7s %6.3f %6.3f %6.3f %6.3f\n", policy_name(policy),
                  kOosShares[s], m.edge_share, format_optional(m.edge_precision, "%.3f").c_str(),
                  m.leak, m.coverage, m.accuracy, m.macro_f1);
    }
  }
}

// Summary over all settings, and the targets for the out-of-scope policy.
bool print_open_intent_targets(const std::vector<OpenIntentRun>& runs) {
  std::printf("\nopen-intent summary (mean over draws) at target precision %.2f:\n",
              kTargetPrecision);
  std::printf("  %-16s %-18s %5s %6s %7s %6s %6s %6s %6s %7s\n", "setting", "policy", "oos", "edge",
              "edge", "oos", "cover", "open", "open", "share x");
  std::printf("  %-16s %-18s %5s %6s %7s %6s %6s %6s %6s %7s\n", "", "", "share", "share", "prec",
              "leak", "age", "acc", "macF1", "today");
  std::vector<std::string> groups;
  for (const OpenIntentRun& r : runs) {
    if (std::find(groups.begin(), groups.end(), r.group) == groups.end()) groups.push_back(r.group);
  }
  for (const std::string& group : groups) {
    for (EdgePolicy policy : kEdgePolicies) {
      for (std::size_t s = 0; s < kOosShares.size(); ++s) {
        double share = 0, precision = 0, leak = 0, coverage = 0, accuracy = 0, f1 = 0, today = 0;
        std::size_t n = 0, with_precision = 0;
        for (const OpenIntentRun& r : runs) {
          if (r.group != group) continue;
          const ShareMetrics& m = r.metrics.at(policy)[s];
          share += m.edge_share;
          if (m.edge_precision) {
            precision += *m.edge_precision;
            ++with_precision;
          }
          leak += m.leak;
          coverage += m.coverage;
          accuracy += m.accuracy;
          f1 += m.macro_f1;
          today += r.metrics.at(EdgePolicy::kTodaysCalibrate)[s].edge_share;
          ++n;
        }
        const double k = static_cast<double>(n);
        std::printf(
            "  %-16s %-18s %5.2f %6.3f %7s %6.3f %6.3f %6.3f %6.3f %7.2f\n", group.c_str(),
            policy_name(policy), kOosShares[s], share / k,
            with_precision == 0
                ? "n/a"
                : format_optional(precision / static_cast<double>(with_precision), "%.3f").c_str(),
            leak / k, coverage / k, accuracy / k, f1 / k, today > 0 ? share / today : 0.0);
      }
    }
  }
  std::printf(
      "  (open acc/macF1: ADB protocol, out of scope = one extra class, not answered by the edge "
      "= predicted out of scope; ADB (BERT) reports accuracy %.3f on BANKING at 50%% known "
      "intents, for scale)\n",
      kAdbBanking50Accuracy);

  std::printf(
      "\ntargets (every setting and draw, out-of-scope share up to 30%%; the policy is met when "
      "all three hold):\n");
  bool all_met = false;  // one target policy meeting everything is enough
  for (EdgePolicy target_policy : kTargetPolicies) {
    bool policy_met = true;
    for (const OpenIntentRun& r : runs) {
      bool precision_met = true, leak_met = true, share_met = true;
      double worst_precision = 1, worst_leak = 0, worst_ratio = 1e9;
      for (std::size_t s = 0; s < kOosShares.size(); ++s) {
        const ShareMetrics& m = r.metrics.at(target_policy)[s];
        const double today = r.metrics.at(EdgePolicy::kTodaysCalibrate)[s].edge_share;
        const double precision = m.edge_precision.value_or(0);
        const double ratio = today > 0 ? m.edge_share / today : (m.edge_share > 0 ? 1e9 : 0);
        worst_precision = std::min(worst_precision, precision);
        worst_leak = std::max(worst_leak, m.leak);
        worst_ratio = std::min(worst_ratio, ratio);
        precision_met &= precision >= kTargetPrecision;
        leak_met &= m.leak <= kAimMaxLeak;
        share_met &= ratio >= kAimEdgeShareRatio;
      }
      std::printf(
          "  %-17s %-21s precision >= %.2f: %.3f %s; leak <= %.2f: %.3f %s; edge share >= %.1fx "
          "today's: x%.2f %s\n",
          policy_name(target_policy), r.name.c_str(), kTargetPrecision, worst_precision,
          precision_met ? "met" : "NOT met", kAimMaxLeak, worst_leak, leak_met ? "met" : "NOT met",
          kAimEdgeShareRatio, worst_ratio, share_met ? "met" : "NOT met");
      policy_met &= precision_met && leak_met && share_met;
    }
    all_met |= policy_met;
  }
  for (const OpenIntentRun& r : runs) {
    double worst_bound_ratio = 1e9;
    for (std::size_t s = 0; s < kOosShares.size(); ++s) {
      const double today = r.metrics.at(EdgePolicy::kTodaysCalibrate)[s].edge_share;
      const double bound = r.metrics.at(EdgePolicy::kBestOosScoreThreshold)[s].edge_share;
      worst_bound_ratio = std::min(worst_bound_ratio, today > 0 ? bound / today : 1e9);
    }
    std::printf(
        "  %-21s the best one threshold on the score, chosen on these test rows, keeps precision "
        "and leak and answers x%.2f of today's share at worst; predict p99 <= 200 us: %.1f us %s\n",
        r.name.c_str(), worst_bound_ratio, r.predict_p99_us,
        r.predict_p99_us <= 200 ? "met" : "NOT met");
  }
  return all_met;
}

// Known-intent draws on banking77 (75% and 50% of the intents), and KUAKE-QIC's own __oos__.
std::vector<OpenIntentRun> run_open_intent_protocol(const fs::path& data_dir, const fs::path& work,
                                                    double search_budget_s, bool quick,
                                                    const std::string& only,
                                                    double assumed_oos_share) {
  std::vector<OpenIntentRun> runs;
  if (only.empty() || std::string("banking77").find(only) != std::string::npos) {
    auto train = hengshi::edge::read_intent_examples(data_dir / "banking77_train.jsonl");
    auto test = hengshi::edge::read_intent_examples(data_dir / "banking77_test.jsonl");
    if (!train || !test) {
      std::fprintf(stderr, "banking77: cannot read the data\n");
      return runs;
    }
    std::set<std::string> intent_set;
    for (const IntentExample& row : *train) intent_set.insert(row.intent);
    const std::vector<std::string> intents(intent_set.begin(), intent_set.end());
    for (const double known_share : {0.75, 0.50}) {
      for (std::size_t draw = 0; draw < (quick ? 1 : kDrawSeeds.size()); ++draw) {
        std::vector<std::string> shuffled = intents;
        std::mt19937_64 random(kDrawSeeds[draw]);
        std::shuffle(shuffled.begin(), shuffled.end(), random);
        const auto keep = static_cast<std::size_t>(known_share * shuffled.size() + 0.5);
        const std::set<std::string> known(shuffled.begin(),
                                          shuffled.begin() + static_cast<std::ptrdiff_t>(keep));
        std::vector<IntentExample> known_rows;
        for (const IntentExample& row : *train) {
          if (known.contains(row.intent)) known_rows.push_back(row);
        }
        char name[64];
        std::snprintf(name, sizeof name, "banking77-%02.0f%%-draw%zu", known_share * 100, draw + 1);
        char group[32];
        std::snprintf(group, sizeof group, "banking77 %02.0f%%", known_share * 100);
        auto run = run_open_intent(name, group, known_rows, *test, work, search_budget_s,
                                   assumed_oos_share);
        if (!run) continue;
        print_open_intent(*run);
        std::fflush(stdout);
        runs.push_back(std::move(*run));
      }
    }
  }
  if (only.empty() || std::string("kuake_qic").find(only) != std::string::npos) {
    auto train = hengshi::edge::read_intent_examples(data_dir / "kuake_qic_train.jsonl");
    auto test = hengshi::edge::read_intent_examples(data_dir / "kuake_qic_dev.jsonl");
    if (train && test) {
      auto run = run_open_intent("kuake_qic", "kuake_qic", *train, *test, work, search_budget_s,
                                 assumed_oos_share);
      if (run) {
        print_open_intent(*run);
        runs.push_back(std::move(*run));
      }
    }
  }
  return runs;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_router: edge/cloud routing at target precision on ../shared/data"};
  std::string data_dir;
  std::string only;
  double search_budget_s = hengshi::edge::TrainOptions{}.autotune_budget_s;
  app.add_option("--data", data_dir, "dataset folder (default $HENGSHI_DATA_DIR, ../shared/data)");
  app.add_option("--search-budget", search_budget_s, "hyper-parameter search budget, CPU seconds");
  app.add_option("--only", only, "kuake | banking77");
  std::string section = "all";
  bool quick = false;
  app.add_option("--section", section, "all | router | open-intent")
      ->check(CLI::IsMember({"all", "router", "open-intent"}));
  double assumed_oos_share = hengshi::edge::TrainOptions{}.assumed_oos_share;
  app.add_option("--assumed-oos-share", assumed_oos_share,
                 "out-of-scope share the trained score states P(in scope) for");
  app.add_flag("--quick", quick, "open-intent protocol: one known-intent draw instead of three");
  CLI11_PARSE(app, argc, argv);
  if (data_dir.empty()) {
    const char* env = std::getenv("HENGSHI_DATA_DIR");
    data_dir = env != nullptr && *env != '\0' ? env : HENGSHI_DEFAULT_DATA_DIR;
  }
  const std::vector<Dataset> datasets = {
      {"kuake_qic", "kuake_qic_train.jsonl", "kuake_qic_dev.jsonl"},
      {"banking77", "banking77_train.jsonl", "banking77_test.jsonl"},
  };
  for (const Dataset& dataset : datasets) {
    if (!only.empty() && dataset.name.find(only) == std::string::npos) continue;
    for (const std::string& file : {dataset.train_file, dataset.test_file}) {
      if (!fs::exists(fs::path(data_dir) / file)) {
        std::printf("skip: dataset not found (%s)\n", (fs::path(data_dir) / file).c_str());
        return 0;
      }
    }
  }

  const hengshi::Config config = hengshi::default_config();
  const std::optional<Prices> small = pool_prices(config, "cloud-small");
  const std::optional<Prices> large = pool_prices(config, "cloud-large");
  if (!small || !large) {
    std::fprintf(stderr, "the embedded config lacks a priced cloud-small or cloud-large pool\n");
    return 1;
  }
  const PoolPrices prices{*small, *large};

  char work_template[] = "/tmp/hengshi-bench-router-XXXXXX";
  if (::mkdtemp(work_template) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const fs::path work(work_template);

  std::printf(
      "bench_router: decide() with the embedded policy and bands calibrated at precision %.2f "
      "(min support %zu) on %s (seed 1, search budget %.0f s)\n",
      kTargetPrecision, kMinSupport, data_dir.c_str(), search_budget_s);
  std::printf(
      "cost: embedded default prices per 1k tokens in/out: cloud-small %.5f/%.4f, cloud-large "
      "%.4f/%.3f; edge, human and refuse cost 0.\n"
      "      tokens: prompt = approx_token_count(text) + %d (system/framing), completion = %d "
      "(assumed: these sets have no answers)\n",
      prices.small.input_per_1k, prices.small.output_per_1k, prices.large.input_per_1k,
      prices.large.output_per_1k, kFramingTokens, kCompletionTokens);

  std::vector<RouterRun> results;
  for (const Dataset& dataset : datasets) {
    if (section == "open-intent") break;
    if (!only.empty() && dataset.name.find(only) == std::string::npos) continue;
    auto result = run(dataset, data_dir, work, search_budget_s, prices);
    if (!result) {
      std::error_code ec;
      fs::remove_all(work, ec);
      return 1;
    }
    print_details(*result);
    std::fflush(stdout);
    results.push_back(std::move(*result));
  }

  if (section != "open-intent") {
    std::printf("\nat target precision %.2f (dev/test rows routed by decide()):\n",
                kTargetPrecision);
    std::printf("%-10s %5s %6s %7s %6s %6s %8s %8s %8s %8s %8s %7s\n", "dataset", "rows", "edge",
                "edge", "oos", "oos", "cost vs", "cost vs", "decide", "decide", "predict", "ratio");
    std::printf("%-10s %5s %6s %7s %6s %6s %8s %8s %8s %8s %8s %7s\n", "", "", "share", "prec",
                "leak", "recall", "small", "large", "p50 us", "p99 us", "p99 us", "p99");
    for (const RouterRun& r : results) {
      const std::optional<double> leak = r.oos_leak();
      std::printf(
          "%-10s %5zu %6.3f %7s %6s %6s %8.3f %8.3f %8.2f %8.2f %8.2f %7.2f\n", r.name.c_str(),
          r.dev_rows, r.edge_share(), format_optional(r.edge_precision(), "%.3f").c_str(),
          format_optional(leak, "%.3f").c_str(),
          format_optional(leak ? std::optional<double>(1 - *leak) : std::nullopt, "%.3f").c_str(),
          r.cost_routed / r.cost_all_small, r.cost_routed / r.cost_all_large, r.decide_p50_us,
          r.decide_p99_us, r.predict_p99_us, r.decide_p99_us / r.predict_p99_us);
    }
    std::printf(
        "(cost vs small/large = routed cost / the same rows all sent to cloud-small / "
        "cloud-large;\n"
        " latency: wall clock per call, single thread, warm; decide() excludes predict(), which "
        "is\n"
        " shown measured in the same run; ratio = decide p99 / predict p99)\n");
    std::printf(
        "reference: CLINC150 (Larson et al. 2019), best in-scope accuracy %.3f with out-of-scope "
        "recall %.3f (BERT, threshold); a different dataset, for scale\n",
        kClincInScopeAccuracy, kClincOosRecall);

    std::printf(
        "\naims: out-of-scope recall >= %.2f with edge precision >= %.2f; decide p99 <= %.0f "
        "us\n",
        kAimOosRecall, kTargetPrecision, kAimDecideP99Us);
    for (const RouterRun& r : results) {
      const std::optional<double> precision = r.edge_precision();
      const bool precision_met = precision && *precision >= kTargetPrecision;
      if (const std::optional<double> leak = r.oos_leak()) {
        const double recall = 1 - *leak;
        std::printf("  %-10s oos recall %.3f (x%.2f CLINC150's %.3f), edge precision %s: %s\n",
                    r.name.c_str(), recall, recall / kClincOosRecall, kClincOosRecall,
                    format_optional(precision, "%.3f").c_str(),
                    recall >= kAimOosRecall && precision_met ? "PASS" : "MISS");
      } else {
        std::printf("  %-10s oos recall n/a (no __oos__ rows), edge precision %s: %s\n",
                    r.name.c_str(), format_optional(precision, "%.3f").c_str(),
                    precision_met ? "PASS" : "MISS");
      }
      std::printf("  %-10s decide p99 %.2f us: %s\n", r.name.c_str(), r.decide_p99_us,
                  r.decide_p99_us <= kAimDecideP99Us ? "PASS" : "MISS");
    }
  }  // section router
  if (section != "router") {
    std::printf(
        "\nopen-intent protocol (ADB, AAAI 2021): banking77 trained on 75%% and 50%% of the "
        "intents (%s), the rest out of scope; kuake_qic with its own __oos__; test traffic "
        "weighted to 10/20/30%% out of scope; policies on the same model: one global threshold "
        "%.2f on the raw softmax, today's calibrate, calibrate over the out-of-scope score\n",
        quick ? "one draw (--quick)" : "three fixed draws", kGlobalSoftmaxThreshold);
    std::fflush(stdout);
    const std::vector<OpenIntentRun> runs =
        run_open_intent_protocol(data_dir, work, search_budget_s, quick, only, assumed_oos_share);
    print_open_intent_targets(runs);
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
