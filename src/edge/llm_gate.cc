#include "edge/llm_gate.h"

#include <filesystem>

#include "edge/finetune_data.h"
#include "edge/llm_answer_run.h"
#include "edge/llm_engine.h"
#include "edge/model_manifest.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

// The engine configuration that serves a finetune directory.
Result<LlmConfig> serving_config(const std::string& dir, int threads, bool merge_adapters, GateSide& side) {
  auto manifest = load_verified_manifest(dir, kEdgeLlmManifest);
  if (!manifest) return manifest.error();
  side.dir = dir;
  side.version = manifest->model_version;
  side.kind = manifest->training.value("kind", "");
  LlmConfig config;
  config.threads = threads;  // context: LlmConfig's default, capped by the model's
  config.merge_adapters = merge_adapters;
  const std::string file = (fs::path(dir) / manifest->model_file).string();
  if (side.kind == "full") {
    config.model_path = file;
    return config;
  }
  const std::string base = manifest->training.value("base_model", "");
  auto described = describe_path(base);
  if (!described) return Error{"model_invalid", dir + ": its base model " + base + ": " + described.error().message};
  if (auto trained = check_trained_base(*manifest, dir, *described, base); !trained) return trained.error();
  config.model_path = base;
  config.adapters = {{"gate", file, 1.0f, side.version}};
  return config;
}

void fill(GateSide& side, const AnswerRun& run) {
  side.rows = run.scores.rows;
  side.f1 = run.scores.mean_f1;
  side.exact = run.scores.exact;
  side.tokens_per_second = run.tokens_per_second;
}

}  // namespace

Status measure_pair(const GateEngine& baseline, const GateEngine& candidate, const GateSet& set,
                    GateSide& baseline_side, GateSide& candidate_side) {
  // Row by row in alternation, alternating which side goes first.
  auto interleave = [&](const std::vector<FinetuneRow>& rows, AnswerTally& base_tally, AnswerTally& candidate_tally) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (i % 2 == 0) base_tally.answer(baseline.engine, baseline.adapter, rows[i], 0);
      candidate_tally.answer(candidate.engine, candidate.adapter, rows[i], 0);
      if (i % 2 == 1) base_tally.answer(baseline.engine, baseline.adapter, rows[i], 0);
    }
  };
  AnswerTally base_tally, candidate_tally, base_oos, candidate_oos;
  interleave(set.in_scope, base_tally, candidate_tally);
  interleave(set.out_of_scope, base_oos, candidate_oos);
  const AnswerRun runs[] = {std::move(base_tally).finish(), std::move(candidate_tally).finish(),
                            std::move(base_oos).finish(), std::move(candidate_oos).finish()};
  for (const auto& run : runs) {
    if (run.failed > 0) return run.first_error;
  }
  fill(baseline_side, runs[0]);
  fill(candidate_side, runs[1]);
  baseline_side.intent_agreement = intent_agreement(set, runs[0].answers);
  candidate_side.intent_agreement = intent_agreement(set, runs[1].answers);
  baseline_side.oos_rows = candidate_side.oos_rows = static_cast<int>(set.out_of_scope.size());
  baseline_side.refusal_rate = refusal_rate(set, runs[2].answers);
  candidate_side.refusal_rate = refusal_rate(set, runs[3].answers);
  return Ok{};
}

Result<GateSet> read_gate_set(const std::string& path, int max_rows, const std::string& refusal) {
  auto data = read_finetune_rows(path);
  if (!data) return data.error();
  GateSet set = make_gate_set(*data, refusal);
  if (set.in_scope.empty()) return Error{"data_invalid", path + ": no in-scope row with an answer"};
  if (max_rows > 0) {
    if (static_cast<int>(set.in_scope.size()) > max_rows) set.in_scope.resize(max_rows);
    if (static_cast<int>(set.out_of_scope.size()) > max_rows) set.out_of_scope.resize(max_rows);
  }
  return set;
}

std::function<std::string(std::string_view)> intent_model_reference(const IntentEngine& engine) {
  return [&engine](std::string_view question) { return engine.predict(question).intent; };
}

Result<GateReport> run_gate(const GateOptions& options) {
  auto set = read_gate_set(options.data_path, options.max_rows, options.refusal);
  if (!set) return set.error();
  std::unique_ptr<IntentEngine> intent;
  if (!options.intent_model.empty()) {
    auto loaded = IntentEngine::load(options.intent_model);
    if (!loaded) return Error{loaded.error().code, "--intent-model: " + loaded.error().message};
    intent = std::move(*loaded);
    use_intent_reference(*set, intent_model_reference(*intent), "intent model " + intent->model_version());
  }
  GateReport report;
  auto baseline_config = serving_config(options.baseline_dir, options.threads, options.merge_adapters, report.baseline);
  if (!baseline_config) return baseline_config.error();
  auto candidate_config = serving_config(options.candidate_dir, options.threads, options.merge_adapters, report.candidate);
  if (!candidate_config) return candidate_config.error();
  auto baseline = LlmEngine::load(*baseline_config);
  if (!baseline) return baseline.error();
  auto candidate = LlmEngine::load(*candidate_config);
  if (!candidate) return candidate.error();
  auto adapter_of = [](const LlmConfig& config) { return config.adapters.empty() ? "" : "gate"; };
  if (auto s = measure_pair({**baseline, adapter_of(*baseline_config)}, {**candidate, adapter_of(*candidate_config)},
                            *set, report.baseline, report.candidate);
      !s) {
    return s.error();
  }
  report.verdict = judge(report.candidate, report.baseline, options.tolerance);
  report.table = gate_json(options.data_path, *set, options.tolerance, report.baseline, report.candidate, report.verdict);
  return report;
}

}  // namespace hengshi::edge
