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
Result<LlmConfig> serving_config(const std::string& dir, int threads, GateSide& side) {
  auto manifest = load_verified_manifest(dir, kEdgeLlmManifest);
  if (!manifest) return manifest.error();
  side.dir = dir;
  side.version = manifest->model_version;
  side.kind = manifest->training.value("kind", "");
  LlmConfig config;
  config.threads = threads;  // context: LlmConfig's default, capped by the model's
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

Status measure_pair(const GateEngine& baseline, const GateEngine& candidate, const std::vector<FinetuneRow>& rows,
                    GateSide& baseline_side, GateSide& candidate_side) {
  AnswerTally base_tally, candidate_tally;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i % 2 == 0) base_tally.answer(baseline.engine, baseline.adapter, rows[i], 0);
    candidate_tally.answer(candidate.engine, candidate.adapter, rows[i], 0);
    if (i % 2 == 1) base_tally.answer(baseline.engine, baseline.adapter, rows[i], 0);
  }
  const AnswerRun base_run = std::move(base_tally).finish();
  const AnswerRun candidate_run = std::move(candidate_tally).finish();
  if (base_run.failed > 0) return base_run.first_error;
  if (candidate_run.failed > 0) return candidate_run.first_error;
  fill(baseline_side, base_run);
  fill(candidate_side, candidate_run);
  return Ok{};
}

Result<std::vector<FinetuneRow>> read_gate_rows(const std::string& path, int max_rows) {
  auto data = read_finetune_rows(path);
  if (!data) return data.error();
  std::vector<FinetuneRow> rows = std::move(data->rows);
  if (rows.empty()) return Error{"data_invalid", path + ": no row with an answer"};
  if (max_rows > 0 && static_cast<int>(rows.size()) > max_rows) rows.resize(max_rows);
  return rows;
}

Result<GateReport> run_gate(const GateOptions& options) {
  auto rows = read_gate_rows(options.data_path, options.max_rows);
  if (!rows) return rows.error();
  GateReport report;
  auto baseline_config = serving_config(options.baseline_dir, options.threads, report.baseline);
  if (!baseline_config) return baseline_config.error();
  auto candidate_config = serving_config(options.candidate_dir, options.threads, report.candidate);
  if (!candidate_config) return candidate_config.error();
  auto baseline = LlmEngine::load(*baseline_config);
  if (!baseline) return baseline.error();
  auto candidate = LlmEngine::load(*candidate_config);
  if (!candidate) return candidate.error();
  auto adapter_of = [](const LlmConfig& config) { return config.adapters.empty() ? "" : "gate"; };
  if (auto s = measure_pair({**baseline, adapter_of(*baseline_config)}, {**candidate, adapter_of(*candidate_config)},
                            *rows, report.baseline, report.candidate);
      !s) {
    return s.error();
  }
  report.verdict = judge(report.candidate, report.baseline, options.tolerance);
  return report;
}

}  // namespace hengshi::edge
