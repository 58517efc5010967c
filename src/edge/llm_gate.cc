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

Status measure(const std::string& dir, const std::vector<FinetuneRow>& rows, int threads, GateSide& side) {
  auto config = serving_config(dir, threads, side);
  if (!config) return config.error();
  auto engine = LlmEngine::load(*config);
  if (!engine) return engine.error();
  return measure_engine(**engine, config->adapters.empty() ? "" : "gate", rows, side);
}

}  // namespace

Status measure_engine(LlmEngine& engine, const std::string& adapter, const std::vector<FinetuneRow>& rows,
                      GateSide& side) {
  auto run = answer_rows(engine, adapter, rows, /*max_tokens=*/0);
  if (run.failed > 0) return run.first_error;
  side.rows = run.scores.rows;
  side.f1 = run.scores.mean_f1;
  side.exact = run.scores.exact;
  side.tokens_per_second = run.tokens_per_second;
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
  if (auto s = measure(options.baseline_dir, *rows, options.threads, report.baseline); !s) return s.error();
  if (auto s = measure(options.candidate_dir, *rows, options.threads, report.candidate); !s) return s.error();
  report.verdict = judge(report.candidate, report.baseline, options.tolerance);
  return report;
}

}  // namespace hengshi::edge
