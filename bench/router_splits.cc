// bench_router_splits: does `calibrate --target-precision P` deliver P on traffic it has never
// seen? For each data set (KUAKE-QIC with its own out-of-scope rows, banking77) and each of N
// random splits of train + test into train / calibrate / held-out (60/20/20, seeded by the split):
// train the intent model on train, calibrate on calibrate at the target — once on point
// estimates (--confidence 0, calibrate's old behaviour) and once on confidence bounds (the
// default 0.9) — then route the held-out rows through each policy and measure the precision the
// edge delivered, the out-of-scope leak and the edge share. Prints, per data set and policy, how
// often the precision reached the target and the leak stayed under the cap, and the mean share;
// each line also shows the policy's precision on its own calibration rows (`calib prec`), so the
// gap between in-sample and held-out is visible. --only runs one data set.
// banking77-open is the open-intent protocol (ADB, DOC): in each split a random quarter of the
// intents is unknown — absent from train, and its calibrate and held-out rows are out of scope —
// so the leak cap is tested on questions the model has never seen an example of.
// Skips cleanly without ../shared/data.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/progress.h"
#include "edge/intent_dataset.h"
#include "edge/intent_engine.h"
#include "edge/cross_fit.h"
#include "edge/intent_trainer.h"
#include "router/calibrate.h"
#include "router/thresholds.h"

namespace {

namespace fs = std::filesystem;
using hengshi::edge::IntentExample;
using hengshi::router::LabelledPrediction;

struct Options {
  std::string data_dir = HENGSHI_DEFAULT_DATA_DIR;
  int splits = 10;
  double target = 0.97;
  double max_leak = 0.05;
  double confidence = hengshi::router::CalibrateOptions{}.confidence;
  double search_budget_s = 0;  // the default training without a search, to keep N splits short
  double open_share = 0.25;    // banking77-open: share of intents held out as unknown
  std::string only;            // one data set's name; empty = all
  int cross_fit = 5;           // the cross policy's folds (calibrate --cross-fit); 0 = no cross policy
};

struct Dataset {
  std::string name;
  std::vector<std::string> files;
  double open_share = 0;  // > 0: the open-intent protocol
};

struct Delivered {
  std::size_t edge = 0, right = 0, oos = 0, oos_answered = 0, rows = 0;
  double precision() const { return edge ? static_cast<double>(right) / static_cast<double>(edge) : 1.0; }
  double leak() const { return oos ? static_cast<double>(oos_answered) / static_cast<double>(oos) : 0.0; }
  double share() const { return rows ? static_cast<double>(edge) / static_cast<double>(rows) : 0.0; }
};

struct Tally {
  int precision_met = 0, leak_met = 0, runs = 0;
  double share = 0, precision = 0, worst_precision = 1.0;
};

Delivered route(const hengshi::router::Thresholds& thresholds, const std::vector<LabelledPrediction>& rows) {
  Delivered out;
  for (const auto& row : rows) {
    ++out.rows;
    const bool oos_truth = row.intent_true == hengshi::router::kOutOfScopeIntent;
    if (oos_truth) ++out.oos;
    const bool answers = !row.predicted_oos && row.has_answer &&
                         thresholds.classify(row.confidence, row.task_type, row.intent_predicted) ==
                             hengshi::router::ConfidenceLevel::high;
    if (!answers) continue;
    ++out.edge;
    if (oos_truth) ++out.oos_answered;
    if (!oos_truth && row.intent_predicted == row.intent_true) ++out.right;
  }
  return out;
}

int run(const Options& options) {
  const std::vector<Dataset> datasets = {
      {"kuake_qic", {"kuake_qic_train.jsonl", "kuake_qic_dev.jsonl"}},
      {"banking77", {"banking77_train.jsonl", "banking77_test.jsonl"}},
      {"b77-open", {"banking77_train.jsonl", "banking77_test.jsonl"}, options.open_share}};
  for (const auto& [name, files, open_share] : datasets) {
    for (const auto& file : files) {
      if (!fs::exists(fs::path(options.data_dir) / file)) {
        std::printf("bench_router_splits: skipped: %s is absent\n", (fs::path(options.data_dir) / file).c_str());
        return 0;
      }
    }
  }
  char work_template[] = "/tmp/hengshi-router-splits-XXXXXX";
  if (::mkdtemp(work_template) == nullptr) return 2;
  const fs::path work(work_template);
  std::printf("bench_router_splits: %d random splits (60/20/20 train/calibrate/held-out) per data set; "
              "calibrate --target-precision %.2f, --max-oos-leak %.2f where there are out-of-scope rows; "
              "point = --confidence 0, bound = --confidence %.2f, cross = bound with --cross-fit %d\n",
              options.splits, options.target, options.max_leak, options.confidence, options.cross_fit);
  std::printf("%-10s %-6s %5s %9s %9s %9s %9s %9s %8s %10s\n", "data", "policy", "split", "precision", "leak", "share",
              "prec ok", "leak ok", "stricter", "calib prec");
  std::map<std::string, Tally> tallies;
  hengshi::Progress progress("bench_router_splits: splits", static_cast<std::size_t>(options.splits) * datasets.size());
  for (const auto& [name, files, open_share] : datasets) {
    if (!options.only.empty() && name != options.only) continue;
    std::vector<IntentExample> all;
    for (const auto& file : files) {
      auto rows = hengshi::edge::read_intent_examples(fs::path(options.data_dir) / file);
      if (!rows) {
        std::fprintf(stderr, "%s\n", rows.error().message.c_str());
        return 2;
      }
      all.insert(all.end(), rows->begin(), rows->end());
    }
    const bool has_oos = open_share > 0 || std::any_of(all.begin(), all.end(), [](const IntentExample& row) {
      return row.intent == hengshi::router::kOutOfScopeIntent;
    });
    for (int split = 0; split < options.splits; ++split) {
      progress.advance();
      std::mt19937_64 rng(1000 + static_cast<std::uint64_t>(split));
      std::vector<IntentExample> rows = all;
      std::shuffle(rows.begin(), rows.end(), rng);
      const std::size_t n = rows.size();
      std::vector<IntentExample> train(rows.begin(), rows.begin() + static_cast<long>(n * 6 / 10));
      std::vector<IntentExample> calib(rows.begin() + static_cast<long>(n * 6 / 10),
                                       rows.begin() + static_cast<long>(n * 8 / 10));
      std::vector<IntentExample> held(rows.begin() + static_cast<long>(n * 8 / 10), rows.end());
      if (open_share > 0) {
        // The open-intent protocol: unknown intents leave train and become out of scope elsewhere.
        std::vector<std::string> intents;
        for (const auto& row : all) intents.push_back(row.intent);
        std::sort(intents.begin(), intents.end());
        intents.erase(std::unique(intents.begin(), intents.end()), intents.end());
        std::shuffle(intents.begin(), intents.end(), rng);
        intents.resize(static_cast<std::size_t>(open_share * static_cast<double>(intents.size()) + 0.5));
        const std::set<std::string> unknown(intents.begin(), intents.end());
        std::erase_if(train, [&](const IntentExample& row) { return unknown.count(row.intent) > 0; });
        for (auto* part : {&calib, &held}) {
          for (auto& row : *part) {
            if (unknown.count(row.intent) > 0) row.intent = hengshi::router::kOutOfScopeIntent;
          }
        }
      }
      const fs::path data = work / (name + "-train.jsonl");
      {
        std::ofstream out(data);
        for (const auto& row : train) {
          out << nlohmann::json{{"text", row.text}, {"intent", row.intent}, {"answer", "answer for " + row.intent}}.dump()
              << '\n';
        }
      }
      hengshi::edge::TrainOptions train_options;
      train_options.data_path = data;
      train_options.out_dir = work / (name + "-model");
      train_options.autotune_budget_s = options.search_budget_s;
      train_options.seed = static_cast<std::uint64_t>(split + 1);
      auto trained = hengshi::edge::train_intent_model(train_options);
      if (!trained) {
        std::fprintf(stderr, "train: %s\n", trained.error().message.c_str());
        return 2;
      }
      auto engine = hengshi::edge::IntentEngine::load(train_options.out_dir);
      if (!engine) return 2;
      auto predict = [&](const std::vector<IntentExample>& part) {
        std::vector<LabelledPrediction> out;
        for (const auto& row : part) {
          out.push_back(hengshi::router::labelled_prediction((*engine)->predict(row.text), "faq", row.intent));
        }
        return out;
      };
      const auto calib_rows = predict(calib);
      const auto held_rows = predict(held);
      // The cross policy: the bound policy fitted on the calibration rows and, out of fold, on
      // the training rows too (calibrate --cross-fit K).
      std::vector<LabelledPrediction> cross_rows;
      if (options.cross_fit > 0) {
        hengshi::edge::CrossFitOptions cross;
        cross.model_dir = train_options.out_dir;
        cross.folds = options.cross_fit;
        cross.work_dir = work;
        auto fitted = hengshi::edge::cross_fit_predictions(cross);
        if (!fitted) {
          std::fprintf(stderr, "cross-fit: %s\n", fitted.error().message.c_str());
          return 2;
        }
        cross_rows = calib_rows;
        for (const auto& row : fitted->rows) {
          cross_rows.push_back(hengshi::router::labelled_prediction(row.prediction, "faq", row.intent));
        }
      }
      std::vector<std::string> policies = {"point", "bound"};
      if (options.cross_fit > 0) policies.emplace_back("cross");
      for (const std::string& policy : policies) {
        const bool bounded = policy != "point";
        hengshi::router::CalibrateOptions calibrate;
        calibrate.target_precision = options.target;
        calibrate.confidence = bounded ? options.confidence : 0.0;
        if (has_oos) calibrate.max_oos_leak = options.max_leak;
        // As calibrate --cross-fit does: the share fitted for is the calibration rows' own.
        if (policy == "cross" && has_oos) calibrate.oos_share = hengshi::router::own_oos_share(calib_rows);
        auto report = hengshi::router::calibrate_predictions(policy == "cross" ? cross_rows : calib_rows, calibrate);
        if (!report) {
          std::fprintf(stderr, "calibrate: %s\n", report.error().message.c_str());
          return 2;
        }
        auto thresholds = hengshi::router::Thresholds::create(report->file);
        if (!thresholds) return 2;
        const Delivered d = route(*thresholds, held_rows);
        std::size_t stricter = 0;
        for (const auto& group : report->groups) stricter += group.fit.high > group.fit.point_high ? 1 : 0;
        const bool precision_ok = d.precision() + 1e-12 >= options.target;
        const bool leak_ok = !has_oos || d.leak() <= options.max_leak + 1e-12;
        // The same policy on its own calibration rows: the gap to the held-out precision is what
        // fitting on these rows cost out of sample.
        std::printf("%-10s %-6s %5d %9.4f %9s %9.3f %9s %9s %8zu %10.4f\n", name.c_str(), policy.c_str(),
                    split, d.precision(), has_oos ? std::to_string(d.leak()).substr(0, 6).c_str() : "-", d.share(),
                    precision_ok ? "yes" : "NO", leak_ok ? "yes" : "NO", stricter, report->final_policy.precision);
        std::fflush(stdout);
        Tally& t = tallies[name + " " + policy];
        ++t.runs;
        t.precision_met += precision_ok ? 1 : 0;
        t.leak_met += leak_ok ? 1 : 0;
        t.share += d.share();
        t.precision += d.precision();
        t.worst_precision = std::min(t.worst_precision, d.precision());
      }
    }
  }
  progress.done();
  std::printf("\n%-18s %12s %12s %10s %10s %10s\n", "data / policy", "prec >= tgt", "leak <= cap", "mean prec",
              "worst", "mean share");
  for (const auto& [key, t] : tallies) {
    std::printf("%-18s %6d of %-3d %6d of %-3d %10.4f %10.4f %10.3f\n", key.c_str(), t.precision_met, t.runs, t.leak_met,
                t.runs, t.precision / t.runs, t.worst_precision, t.share / t.runs);
  }
  std::printf("target: precision >= target and leak <= cap in >= 90%% of splits, at a mean share no more than 10%% "
              "below the point policy's\n");
  for (const auto& [name, files, open_share] : datasets) {
    if (!options.only.empty() && name != options.only) continue;
    const Tally& point = tallies[name + " point"];
    for (const char* policy : {"bound", "cross"}) {
      if (tallies.count(name + " " + policy) == 0) continue;
      const Tally& bound = tallies[name + " " + policy];
      const bool met = bound.precision_met * 10 >= bound.runs * 9 && bound.leak_met * 10 >= bound.runs * 9 &&
                       bound.share >= 0.9 * point.share;
      std::printf("  %-10s %s: %d/%d precision, %d/%d leak, share %.3f vs %.3f (x%.2f): %s\n", name.c_str(), policy,
                  bound.precision_met, bound.runs, bound.leak_met, bound.runs, bound.share / bound.runs,
                  point.share / point.runs, point.share > 0 ? bound.share / point.share : 0.0, met ? "met" : "NOT met");
    }
  }
  std::error_code ec;
  fs::remove_all(work, ec);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_router_splits: delivered precision and leak of calibrate's bands on held-out splits"};
  Options options;
  app.add_option("--data", options.data_dir, "../shared/data");
  app.add_option("--splits", options.splits, "random splits per data set")->check(CLI::Range(1, 100));
  app.add_option("--target-precision", options.target, "calibrate's target");
  app.add_option("--max-oos-leak", options.max_leak, "calibrate's leak cap (data sets with out-of-scope rows)");
  app.add_option("--confidence", options.confidence, "the bound policy's --confidence");
  app.add_option("--search-budget", options.search_budget_s, "train's search budget per split (CPU s)");
  app.add_option("--open-share", options.open_share, "b77-open: share of intents unknown in each split")
      ->check(CLI::Range(0.05, 0.75));
  app.add_option("--cross-fit", options.cross_fit,
                 "folds of the cross policy (the bound policy with calibrate --cross-fit K); 0 = leave it out")
      ->check(CLI::Range(0, 20));
  app.add_option("--only", options.only, "one data set: kuake_qic, banking77 or b77-open");
  CLI11_PARSE(app, argc, argv);
  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_router_splits: %s\n", error.what());
    return 2;
  }
}
