// The regression gate's comparison (`hengshi edge gate`, llm_gate.h): a candidate passes when
// it is no worse than the baseline beyond a tolerance on each of: answer F1, intent agreement
// (FAQ sets: its answer is nearest the answer of the question's own intent), refusals on
// out-of-scope rows, and generation speed. Pure, no llama.cpp: built and tested in every
// configuration.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "edge/finetune_data.h"

namespace hengshi::edge {

struct GateSide {
  std::string dir;
  std::string version;  // the manifest's model_version
  std::string kind;     // full | lora
  int rows = 0;
  double f1 = 0;     // mean answer F1 (answer_score.h)
  double exact = 0;  // share answered exactly
  double tokens_per_second = 0;
  // FAQ sets with two or more intents: share of judged rows whose answer is nearest (answer F1)
  // to their reference intent's answer among all intents' answers (GateSet::intent_reference);
  // -1 = not measured.
  double intent_agreement = -1;
  int oos_rows = 0;           // out-of-scope (__oos__) rows asked
  double refusal_rate = -1;   // share of them answered with the refusal; -1 = no refusal text
};

struct GateTolerance {
  double f1 = 0.02;         // the candidate may score this much lower
  double speed = 0.25;      // and generate this share slower (speed is noisy on shared machines)
  double agreement = 0.05;  // and agree with the intents this much less
  double refusal = 0.05;    // and refuse this much less of the out-of-scope rows
};

// The regression set split for the gate: in-scope rows (scored on their answers) and
// out-of-scope rows (scored on refusing), with the refusal text — the __oos__ rows' answer in
// the data, else `refusal` — and each intent's answer.
struct GateSet {
  std::vector<FinetuneRow> in_scope;
  std::vector<FinetuneRow> out_of_scope;
  std::string refusal;  // "" = refusals not measured
  std::vector<std::pair<std::string, std::string>> intent_answers;  // (intent, answer), in-scope
  // The intent each in-scope row's answer is judged against: by default its label; with an
  // intent model, what the intent engine (which answers the FAQ traffic) predicts for the
  // question, so the LLM is held to agree with the edge's other engine. "" = not judged (no
  // label, or the engine calls it out of scope).
  std::vector<std::string> reference_intents;  // empty = the labels
  std::string intent_reference = "labels";
};
GateSet make_gate_set(const FinetuneData& data, const std::string& refusal);
// Judge intent agreement against `predict(question)` (an intent engine), named `name`.
void use_intent_reference(GateSet& set, const std::function<std::string(std::string_view)>& predict,
                          const std::string& name);

// An answer counts as a refusal when it is the refusal text, or has answer F1 >= 0.5 with it.
bool is_refusal(const std::string& answer, const std::string& refusal);
// Intent agreement of `answers` (one per set.in_scope row); -1 with fewer than two intents.
double intent_agreement(const GateSet& set, const std::vector<std::string>& answers);
// Refusal rate of `answers` (one per set.out_of_scope row); -1 without rows or refusal text.
double refusal_rate(const GateSet& set, const std::vector<std::string>& answers);

struct GateVerdict {
  bool passed = true;
  std::vector<std::string> reasons;  // why it failed, one line each
};

// Pure: the comparison alone.
GateVerdict judge(const GateSide& candidate, const GateSide& baseline, const GateTolerance& tolerance);

// The gate's table as the history, /admin/edge and the CLI show it: data, row counts,
// tolerances, both sides (a figure not measured is null), verdict and reasons. `adapter` names
// each side's adapter ("" = its base).
nlohmann::json gate_json(const std::string& data, const GateSet& set, const GateTolerance& tolerance,
                         const GateSide& baseline, const GateSide& candidate, const GateVerdict& verdict);

}  // namespace hengshi::edge
