#include "edge/llm_gate.h"

#include <chrono>
#include <filesystem>

#include "edge/answer_score.h"
#include "edge/finetune_data.h"
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
  const fs::path base_path(base);
  auto described = describe_file(base_path.parent_path().empty() ? fs::path(".") : base_path.parent_path(),
                                 base_path.filename().string());
  if (!described || described->xxh64 != manifest->training.value("base_xxh64", "")) {
    return Error{"model_invalid", dir + ": its base model " + base + " is missing or changed since training"};
  }
  config.model_path = base;
  config.adapters = {{"gate", file, 1.0f, side.version}};
  return config;
}

Status measure(const std::string& dir, const std::vector<FinetuneRow>& rows, int threads, GateSide& side) {
  auto config = serving_config(dir, threads, side);
  if (!config) return config.error();
  const std::string adapter = config->adapters.empty() ? "" : "gate";
  auto engine = LlmEngine::load(*config);
  if (!engine) return engine.error();
  double f1 = 0;
  int exact = 0;
  long tokens = 0;
  double seconds = 0;
  for (const auto& row : rows) {
    GenerationRequest request;
    request.messages = (*engine)->edge_messages(row.prompt());
    request.adapter = adapter;
    const auto started = std::chrono::steady_clock::now();
    auto generated = (*engine)->generate_blocking(request);
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!generated) return generated.error();
    tokens += generated->completion_tokens;
    f1 += char_f1(generated->text, row.answer());
    exact += same_answer(generated->text, row.answer()) ? 1 : 0;
  }
  side.rows = static_cast<int>(rows.size());
  side.f1 = rows.empty() ? 0 : f1 / double(rows.size());
  side.exact = rows.empty() ? 0 : double(exact) / double(rows.size());
  side.tokens_per_second = seconds > 0 ? double(tokens) / seconds : 0;
  return Ok{};
}

}  // namespace

Result<GateReport> run_gate(const GateOptions& options) {
  auto data = read_finetune_rows(options.data_path);
  if (!data) return data.error();
  std::vector<FinetuneRow> rows = std::move(data->rows);
  if (options.max_rows > 0 && static_cast<int>(rows.size()) > options.max_rows) rows.resize(options.max_rows);
  GateReport report;
  if (auto s = measure(options.baseline_dir, rows, options.threads, report.baseline); !s) return s.error();
  if (auto s = measure(options.candidate_dir, rows, options.threads, report.candidate); !s) return s.error();
  report.verdict = judge(report.candidate, report.baseline, options.tolerance);
  return report;
}

}  // namespace hengshi::edge
