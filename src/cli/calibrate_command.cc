#include "cli/calibrate_command.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command_failure.h"
#include "core/json_text.h"
#include "edge/cross_fit.h"
#include "edge/intent_engine.h"
#include "obs/request_log_reader.h"
#include "router/calibrate.h"
#include "router/thresholds.h"

namespace hengshi::cli {
namespace {

struct CalibrateArgs {
  std::string model;
  std::string data;
  std::string out;
  double target_precision = 0.97;
  std::size_t min_support = 20;
  std::string default_task_type = "faq";
  double oos_share_value = 0;
  std::optional<double> oos_share;  // unset: the data's own share (set from the option's count)
  std::string rule = "hierarchical";
  bool no_synthetic_oos = false;
  double max_oos_leak_value = 0;
  std::optional<double> max_oos_leak;  // unset: precision only
  double confidence = router::CalibrateOptions{}.confidence;
  int cross_fit = 0;  // folds; 0 = the held-out rows alone
  std::vector<std::string> traffic_logs;  // request logs whose questions give the intent mix
  std::string predictions;                // where to write the evidence rows ("" = nowhere)
};

int calibrate_failed(const std::string& message) {
  return command_failed("hengshi calibrate", message);
}

// One line per row of evidence, so an operator can see why a band sits where it does (which
// rows above it fail, and whether they are held-out rows or training rows out of fold).
nlohmann::json evidence_line(const char* source, const std::string& text, const std::string& intent,
                             const edge::IntentPrediction& prediction) {
  return {{"source", source},
          {"text", text},
          {"intent", intent},
          {"predicted", prediction.intent},
          {"confidence", prediction.confidence},
          {"intent_confidence", prediction.intent_confidence},
          {"in_scope", prediction.in_scope},
          {"has_answer", !prediction.answer.empty()}};
}

int run_calibrate(const CalibrateArgs& args) {
  // Checked here rather than with CLI::Range so a bad value exits 2 like every other error, and
  // so the open end at 0 is stated exactly.
  if (!(args.target_precision > 0 && args.target_precision <= 1)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", args.target_precision);
    return calibrate_failed(std::string("--target-precision must be in (0, 1] (got ") + got + ")");
  }
  if (args.min_support == 0) return calibrate_failed("--min-support must be at least 1");
  if (args.oos_share && !(*args.oos_share >= 0 && *args.oos_share < 1)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", *args.oos_share);
    return calibrate_failed(std::string("--oos-share must be in [0, 1) (got ") + got + ")");
  }
  router::ThresholdRule rule = router::ThresholdRule::hierarchical;
  if (args.rule == "per-group") {
    rule = router::ThresholdRule::per_group_legacy;
  } else if (args.rule != "hierarchical") {
    return calibrate_failed("--rule must be hierarchical or per-group (got \"" + args.rule + "\")");
  }

  auto rows = router::read_calibration_rows(args.data);
  if (!rows) return calibrate_failed(rows.error().message);
  auto engine = edge::IntentEngine::load(args.model);
  if (!engine) return calibrate_failed("model refused: " + engine.error().message);

  router::CalibrateOptions options;
  options.target_precision = args.target_precision;
  options.min_support = args.min_support;
  options.default_task_type = args.default_task_type;
  options.rule = rule;
  options.oos_share = args.oos_share;
  options.synthetic_oos = !args.no_synthetic_oos;
  options.max_oos_leak = args.max_oos_leak;
  options.confidence = args.confidence;
  if (!args.traffic_logs.empty()) {
    // The mix the bands are for: what this model predicts on the questions production logged.
    std::vector<obs::LoggedRequest> logged;
    obs::LogReadStats stats;
    if (Status read = obs::read_request_log_files(args.traffic_logs, logged, stats); !read) {
      return calibrate_failed("--traffic-log: " + read.error().message);
    }
    std::vector<std::string> questions;
    for (const obs::LoggedRequest& request : logged) {
      if (request.prompt) questions.push_back(*request.prompt);
    }
    const router::TrafficPrior traffic = router::traffic_intent_prior(**engine, questions);
    if (traffic.questions == 0) {
      return calibrate_failed("--traffic-log: " + std::to_string(stats.requests) +
                              " logged requests, none with its question (the gateway logs "
                              "questions with log.text: true)");
    }
    options.intent_prior = traffic.prior;
    std::fprintf(stderr,
                 "hengshi calibrate: intent mix from %zu logged questions (%zu predicted in scope, %zu of %zu "
                 "intents seen)\n",
                 traffic.questions, traffic.in_scope, traffic.intents_seen, traffic.prior.size());
  }
  std::optional<std::ofstream> evidence;
  if (!args.predictions.empty()) {
    evidence.emplace(args.predictions, std::ios::binary | std::ios::trunc);
    if (!*evidence) return calibrate_failed("--predictions: cannot write " + args.predictions);
    for (const router::CalibrationRow& row : *rows) {
      *evidence << dump_text(evidence_line("held_out", row.text, row.intent, (*engine)->predict(row.text)))
                << '\n';
    }
  }
  std::vector<router::LabelledPrediction> out_of_fold;
  if (args.cross_fit != 0) {
    edge::CrossFitOptions cross;
    cross.model_dir = args.model;
    cross.folds = args.cross_fit;
    // The fold models (one at a time, as big as the served one) go next to the thresholds file.
    cross.work_dir = std::filesystem::absolute(args.out).parent_path();
    auto fitted = edge::cross_fit_predictions(cross);
    if (!fitted) return calibrate_failed("cross-fit: " + fitted.error().message);
    for (const edge::OutOfFoldRow& row : fitted->rows) {
      out_of_fold.push_back(router::labelled_prediction(row.prediction, args.default_task_type, row.intent));
      if (evidence) {
        *evidence << dump_text(evidence_line("out_of_fold", row.text, row.intent, row.prediction)) << '\n';
      }
    }
    std::fprintf(stderr, "hengshi calibrate: %zu rows of %s predicted out of fold by %d fold models in %.1f s\n",
                 fitted->rows.size(), fitted->data_file.string().c_str(), fitted->folds, fitted->seconds);
  }
  if (evidence && !evidence->flush())
    return calibrate_failed("--predictions: write to " + args.predictions + " failed");
  auto report = router::calibrate_thresholds(**engine, *rows, options, std::move(out_of_fold), args.cross_fit);
  if (!report) return calibrate_failed(report.error().message);

  std::fputs(router::format_calibrate_report(*report).c_str(), stdout);
  if (Status written = router::write_thresholds_file(report->file, args.out); !written) {
    return calibrate_failed(written.error().message);
  }
  std::printf("\nthresholds %s written to %s\n", report->file.version.c_str(), args.out.c_str());
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Fit the router's confidence thresholds for an intent model on labelled rows");
  calibrate->add_option("--model", args->model, "intent model directory (hengshi train --out)")
      ->required();
  calibrate
      ->add_option("--data", args->data,
                   "held-out rows {\"text\", \"intent\", \"task_type\"?}; __oos__ = out of scope")
      ->required();
  calibrate
      ->add_option("--target-precision", args->target_precision,
                   "edge precision each band's high must reach, in (0, 1]")
      ->required();
  calibrate->add_option("--out", args->out, "thresholds file to write (replaced atomically)")
      ->required();
  calibrate->add_option("--min-support", args->min_support,
                        "rows a task type or intent needs for a band of its own (default 20)");
  calibrate->add_option("--default-task-type", args->default_task_type,
                        "task type of rows without one (default faq)");
  CLI::Option* oos_share =
      calibrate->add_option("--oos-share", args->oos_share_value,
                            "out-of-scope share of the traffic to fit for, in [0, 1): out-of-scope "
                            "rows are reweighted to it (default: the data's own share); data "
                            "without __oos__ rows uses the model's stand-ins from held-out intents");
  CLI::Option* max_oos_leak = calibrate->add_option(
      "--max-oos-leak", args->max_oos_leak_value,
      "at most this share of out-of-scope rows may get an edge answer, in [0, 1]: every band's "
      "high is raised to the least floor that keeps it (needs out-of-scope rows or --oos-share)");
  calibrate->add_option("--confidence", args->confidence,
                        "bands hold on new traffic at this confidence: each band's one-sided lower "
                        "bound of precision must reach the target, the leak's upper bound stay under "
                        "--max-oos-leak (default 0.9; 0 = point estimates)");
  calibrate->add_option("--cross-fit", args->cross_fit,
                        "K: also fit on the model's own training rows, each predicted by one of K fold "
                        "models trained the same way without it (K trainings; more rows, tighter "
                        "bounds); the training data must be unchanged (default 0 = off)");
  calibrate->add_option("--traffic-log", args->traffic_logs,
                        "request log file(s) of recent traffic, written with log.text: true: the in-scope "
                        "rows are weighted to the intent mix the model predicts on their questions, so "
                        "the bands hold for the intents people ask most (default: the rows' own mix)");
  calibrate->add_option("--predictions", args->predictions,
                        "also write every row the bands rest on as JSON Lines {source: held_out | "
                        "out_of_fold, text, intent, predicted, confidence, ...}, to see why a band "
                        "sits where it does");
  calibrate->add_flag("--no-synthetic-oos", args->no_synthetic_oos,
                      "never stand in for missing out-of-scope rows (a share > 0 then needs "
                      "__oos__ rows in the data)");
  calibrate->add_option("--rule", args->rule,
                        "hierarchical (default: groups keep their parent's band unless their rows "
                        "show otherwise) or per-group (the older rule: each group fitted alone)");
  calibrate->callback([args, oos_share, max_oos_leak, &exit_code] {
    if (oos_share->count() > 0) args->oos_share = args->oos_share_value;
    if (max_oos_leak->count() > 0) args->max_oos_leak = args->max_oos_leak_value;
    exit_code = run_calibrate(*args);
  });
}

}  // namespace hengshi::cli
