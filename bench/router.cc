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
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/decision.h"
#include "edge/intent_dataset.h"
#include "edge/intent_engine.h"
#include "edge/intent_trainer.h"
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_router: edge/cloud routing at target precision on ../shared/data"};
  std::string data_dir;
  std::string only;
  double search_budget_s = hengshi::edge::TrainOptions{}.autotune_budget_s;
  app.add_option("--data", data_dir, "dataset folder (default $HENGSHI_DATA_DIR, ../shared/data)");
  app.add_option("--search-budget", search_budget_s, "hyper-parameter search budget, CPU seconds");
  app.add_option("--only", only, "kuake | banking77");
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

  std::printf("\nat target precision %.2f (dev/test rows routed by decide()):\n", kTargetPrecision);
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
      "(cost vs small/large = routed cost / the same rows all sent to cloud-small / cloud-large;\n"
      " latency: wall clock per call, single thread, warm; decide() excludes predict(), which is\n"
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
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}
