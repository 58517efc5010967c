// The regression gate for a fine-tuned edge LLM (`hengshi edge gate`): a candidate directory
// and the serving baseline answer the same fixed regression set with greedy decoding; the
// candidate passes when its answer F1 is no worse than the baseline's beyond a tolerance and its
// generation speed no slower beyond another. Directories are `hengshi finetune` outputs (a full
// model, or a LoRA adapter over the base its manifest names and hashes).
#pragma once

#include <string>

#include "core/result.h"
#include "edge/finetune_data.h"
#include "edge/gate_verdict.h"
#include "edge/llm_engine.h"

namespace hengshi::edge {

struct GateOptions {
  std::string candidate_dir;
  std::string baseline_dir;
  std::string data_path;  // rows as finetune reads them (finetune_data.h)
  GateTolerance tolerance;
  int threads = 0;
  int max_rows = 0;  // 0 = every row
};

struct GateReport {
  GateSide candidate, baseline;
  GateVerdict verdict;
};

// Errors: model_invalid (a directory or its manifest), data_invalid, model_load_failed.
Result<GateReport> run_gate(const GateOptions& options);

// Both sides of the gate on engines already loaded (the gateway's promotion loads them itself):
// F1, exact share and tokens/s of each engine with its adapter ("" = the base) over `rows`,
// row by row in alternation (and alternating which goes first) so that both are timed under
// the same load. The sides' dir, version and kind are the caller's. Errors: the first failed
// generation's.
struct GateEngine {
  LlmEngine& engine;
  std::string adapter;
};
Status measure_pair(const GateEngine& baseline, const GateEngine& candidate, const std::vector<FinetuneRow>& rows,
                    GateSide& baseline_side, GateSide& candidate_side);
// The rows of a regression set, the first `max_rows` of them (0 = all).
Result<std::vector<FinetuneRow>> read_gate_rows(const std::string& path, int max_rows);

}  // namespace hengshi::edge
