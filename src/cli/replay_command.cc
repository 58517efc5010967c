#include "cli/replay_command.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chain/shadow.h"
#include "cli/command_failure.h"
#include "core/json_lines.h"
#include "core/json_text.h"
#include "edge/intent_engine.h"
#include "obs/replay.h"
#include "obs/request_log_reader.h"
#include "router/thresholds.h"

namespace hengshi::cli {
namespace {

using nlohmann::json;

struct ReplayArgs {
  std::vector<std::string> logs;
  std::string model;
  std::string thresholds;
  std::string labels;
  double target_precision = 0.97;
  bool json_output = false;
};

int replay_failed(const std::string& message) { return command_failed("hengshi replay", message); }

// Labels: JSON Lines {"id": ..., "intent": ...} or {"text": ..., "intent": ...}.
Status read_labels(const std::string& path, obs::ReplayInputs& inputs) {
  return for_each_json_line(path, [&](const json& row, std::size_t) -> std::string {
    std::string intent;
    if (std::string why = required_string(row, "intent", intent); !why.empty()) return why;
    if (row.contains("id") && row["id"].is_string()) {
      inputs.labels_by_id[row["id"].get<std::string>()] = intent;
    } else if (row.contains("text") && row["text"].is_string()) {
      inputs.labels_by_text[row["text"].get<std::string>()] = intent;
    } else {
      return "needs \"id\" or \"text\" (a string) beside \"intent\"";
    }
    return {};
  });
}

int run_replay(const ReplayArgs& args) {
  if (!(args.target_precision > 0 && args.target_precision <= 1))
    return replay_failed("--target-precision must be in (0, 1]");
  std::vector<obs::LoggedRequest> rows;
  obs::LogReadStats stats;
  if (Status read = obs::read_request_log_files(args.logs, rows, stats); !read)
    return replay_failed(read.error().message);
  std::fprintf(stderr, "hengshi replay: %zu line(s): %zu request(s), %zu shadow(s), %zu malformed, %zu of another schema\n",
               stats.lines, stats.requests, stats.shadows, stats.malformed, stats.other_schema);

  obs::ReplayInputs inputs;
  inputs.target_precision = args.target_precision;
  inputs.agree = [](std::string_view a, std::string_view b) {
    return chain::text_similarity(a, b) >= chain::kShadowAgreeAt;
  };
  std::unique_ptr<edge::IntentEngine> engine;
  std::map<std::string, const obs::LoggedRequest*> production;  // prompt → its logged decision
  if (!args.model.empty()) {
    auto loaded = edge::IntentEngine::load(args.model);
    if (!loaded) return replay_failed("--model: " + loaded.error().message);
    engine = std::move(*loaded);
    std::fprintf(stderr, "hengshi replay: candidate model %s\n", engine->model_version().c_str());
    inputs.predict = [&](std::string_view text) {
      const edge::IntentPrediction p = engine->predict(text);
      return obs::CandidateAnswer{p.intent, p.answer, p.confidence, p.is_oos};
    };
  } else {
    // No candidate model: production's own decisions, judged by labels and shadows only.
    for (const auto& row : rows) {
      if (row.prompt) production[*row.prompt] = &row;
    }
    inputs.compare_answers = false;
    inputs.predict = [&](std::string_view text) {
      auto it = production.find(std::string(text));
      if (it == production.end() || it->second->intent.empty() || it->second->intent == "__oos__") {
        return obs::CandidateAnswer{};
      }
      return obs::CandidateAnswer{it->second->intent, it->second->intent, it->second->confidence.value_or(0.0), false};
    };
    std::fprintf(stderr, "hengshi replay: no --model: replaying production's own decisions\n");
  }
  router::Thresholds thresholds;
  if (!args.thresholds.empty()) {
    auto file = router::load_thresholds_file(args.thresholds);
    if (!file) return replay_failed("--thresholds: " + file.error().message);
    auto created = router::Thresholds::create(std::move(*file), args.thresholds);
    if (!created) return replay_failed("--thresholds: " + created.error().message);
    thresholds = std::move(*created);
  }
  inputs.edge_threshold = [&](std::string_view task, std::string_view intent) {
    return thresholds.band(task, intent).high;
  };
  if (!args.labels.empty()) {
    if (auto read = read_labels(args.labels, inputs); !read)
      return replay_failed(read.error().message);
  }

  const obs::ReplayReport report = obs::replay(rows, inputs);
  if (args.json_output) {
    std::cout << dump_text(obs::to_json(report)) << '\n';
  } else {
    std::cout << obs::format_report(report, args.target_precision);
  }
  return 0;
}

}  // namespace

void add_replay_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* replay = app.add_subcommand(
      "replay", "Re-run logged requests (log.text) through a candidate edge model and thresholds, offline");
  replay->add_option("--log", args->logs, "request log file(s), schema 1 (rotated files too)")
      ->required()
      ->check(CLI::ExistingFile);
  replay->add_option("--model", args->model, "candidate intent model directory (default: production's decisions)")
      ->check(CLI::ExistingDirectory);
  replay->add_option("--thresholds", args->thresholds, "candidate thresholds file (from `hengshi calibrate`)")
      ->check(CLI::ExistingFile);
  replay->add_option("--labels", args->labels, "JSON Lines {\"id\" or \"text\", \"intent\"}: the truth where known")
      ->check(CLI::ExistingFile);
  replay->add_option("--target-precision", args->target_precision, "precision the chosen thresholds must reach");
  replay->add_flag("--json", args->json_output, "one JSON object instead of the tables");
  replay->callback([args, &exit_code] { exit_code = run_replay(*args); });
}

}  // namespace hengshi::cli
