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
#include "edge/intent_engine.h"
#include "edge/llm_engine.h"

namespace hengshi::edge {

struct GateOptions {
  std::string candidate_dir;
  std::string baseline_dir;
  std::string data_path;  // rows as finetune reads them (finetune_data.h); __oos__ rows are
                          // asked for refusals
  std::string refusal;    // the refusal text when no __oos__ row gives one ("" = not measured)
  GateTolerance tolerance;
  int threads = 0;
  int max_rows = 0;  // 0 = every row
  bool merge_adapters = true;  // as edge.llm.merge_adapters: measure what would serve
  std::string intent_model;    // an intent model directory: intent agreement is judged against
                               // its predictions instead of the labels ("" = the labels)
};

struct GateReport {
  GateSide candidate, baseline;
  GateVerdict verdict;
  nlohmann::json table;  // gate_json()
};

// Errors: model_invalid (a directory or its manifest), data_invalid, model_load_failed.
Result<GateReport> run_gate(const GateOptions& options);

// An intent engine as the gate's intent reference (use_intent_reference): its top intent.
std::function<std::string(std::string_view)> intent_model_reference(const IntentEngine& engine);

// Both sides of the gate on engines already loaded (the gateway's promotion loads them itself):
// F1, exact share, intent agreement and tokens/s of each engine with its adapter ("" = the base)
// over the in-scope rows, and its refusals of the out-of-scope ones,
// row by row in alternation (and alternating which goes first) so that both are timed under
// the same load. The sides' dir, version and kind are the caller's. Errors: the first failed
// generation's.
struct GateEngine {
  LlmEngine& engine;
  std::string adapter;
};
Status measure_pair(const GateEngine& baseline, const GateEngine& candidate, const GateSet& set,
                    GateSide& baseline_side, GateSide& candidate_side);
// A regression set (make_gate_set), at most `max_rows` in-scope and as many out-of-scope rows
// (0 = all). Errors: data_invalid.
Result<GateSet> read_gate_set(const std::string& path, int max_rows, const std::string& refusal);

}  // namespace hengshi::edge
