// The regression gate for a fine-tuned edge LLM (`hengshi edge gate`): a candidate directory
// and the serving baseline answer the same fixed regression set with greedy decoding; the
// candidate passes when its answer F1 is no worse than the baseline's beyond a tolerance and its
// generation speed no slower beyond another. Directories are `hengshi finetune` outputs (a full
// model, or a LoRA adapter over the base its manifest names and hashes).
#pragma once

#include <string>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

struct GateSide {
  std::string dir;
  std::string version;  // the manifest's model_version
  std::string kind;     // full | lora
  int rows = 0;
  double f1 = 0;     // mean answer F1 (answer_score.h)
  double exact = 0;  // share answered exactly
  double tokens_per_second = 0;
};

struct GateTolerance {
  double f1 = 0.02;     // the candidate may score this much lower
  double speed = 0.25;  // and generate this share slower (speed is noisy on shared machines)
};

struct GateVerdict {
  bool passed = true;
  std::vector<std::string> reasons;  // why it failed, one line each
};

// Pure: the comparison alone.
GateVerdict judge(const GateSide& candidate, const GateSide& baseline, const GateTolerance& tolerance);

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

}  // namespace hengshi::edge
