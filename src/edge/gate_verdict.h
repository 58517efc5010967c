// The regression gate's comparison (`hengshi edge gate`, llm_gate.h): a candidate passes when
// its answer F1 is no worse than the baseline's beyond a tolerance and its generation speed no
// slower beyond another. Pure, no llama.cpp: built and tested in every configuration.
#pragma once

#include <string>
#include <vector>

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

}  // namespace hengshi::edge
