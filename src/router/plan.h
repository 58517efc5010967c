// make_plan(): the degradation chain for one decision (DESIGN-NOTES "The chain") — which levels
// may answer, in order. Pure function of the decision and what this gateway has:
//   edge intent        L0 intent → L2 cloud-small → L3 cloud-large → L4
//   edge intent, middle band with a judge: L0 intent (served if cloud-small confirms) → L2 → L3 → L4
//   edge LLM           L0 LLM → L1 LLM degraded (once) → L2 → L3 → L4
//   cloud-small        L2 → L3 → L4;   cloud-large: L3 → L2 → L4 (an answer beats a refusal)
//   pinned model       only that target (and L1 for the edge LLM): the caller asked for it
//   PII / uncheckable  edge levels only, then the safe reply: never a cloud step
//   human              L4 hand-off;  refuse: L4 safe reply;  deadline_exceeded: no step
//   offline            edge levels only (intent at the offline threshold, else the LLM), then L4
// A missing pool or edge engine drops its steps; L4 is there unless chain.last_resort is error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/decision.h"

namespace hengshi::router {

struct PlanInputs {
  bool intent_answer = false;   // the intent engine has an answer the edge may serve
  bool llm_available = false;
  std::vector<std::string> pools;
  // The last resort's source (human_handoff or last_resort_reply); nullopt = no L4.
  std::optional<Source> last_resort = Source::last_resort_reply;
};

Plan make_plan(const Decision& decision, const PlanInputs& inputs);

}  // namespace hengshi::router
