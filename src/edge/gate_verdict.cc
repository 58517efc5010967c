#include "edge/gate_verdict.h"

#include <cstdio>
#include <map>

#include "edge/answer_score.h"
#include "edge/intent_dataset.h"

namespace hengshi::edge {
namespace {

std::string percent(double share) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f%%", share * 100);
  return text;
}

std::string figure(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", value);
  return text;
}

}  // namespace

GateSet make_gate_set(const FinetuneData& data, const std::string& refusal) {
  GateSet set;
  set.refusal = refusal;
  std::map<std::string, std::string> answers;
  for (const auto& row : data.rows) {
    if (row.intent == kOutOfScopeIntent) {
      set.out_of_scope.push_back(row);
      set.refusal = row.answer();  // the data teaches its own refusal
    } else {
      set.in_scope.push_back(row);
      if (!row.intent.empty()) answers.emplace(row.intent, row.answer());
    }
  }
  for (const auto& row : data.out_of_scope) set.out_of_scope.push_back(row);
  set.intent_answers.assign(answers.begin(), answers.end());
  return set;
}

bool is_refusal(const std::string& answer, const std::string& refusal) {
  return !refusal.empty() && (same_answer(answer, refusal) || char_f1(answer, refusal) >= 0.5);
}

void use_intent_reference(GateSet& set, const std::function<std::string(std::string_view)>& predict,
                          const std::string& name) {
  set.reference_intents.clear();
  for (const FinetuneRow& row : set.in_scope) {
    // The question: the last user turn before the answer.
    std::string_view question;
    for (std::size_t i = row.messages.size(); i-- > 1;) {
      if (row.messages[i - 1].role == "user") {
        question = row.messages[i - 1].text;
        break;
      }
    }
    std::string intent = question.empty() ? std::string() : predict(question);
    if (intent == kOutOfScopeIntent) intent.clear();
    set.reference_intents.push_back(std::move(intent));
  }
  set.intent_reference = name;
}

double intent_agreement(const GateSet& set, const std::vector<std::string>& answers) {
  if (set.intent_answers.size() < 2) return -1;
  int labelled = 0, agreed = 0;
  for (std::size_t i = 0; i < set.in_scope.size() && i < answers.size(); ++i) {
    const std::string& reference =
        set.reference_intents.empty() ? set.in_scope[i].intent : set.reference_intents[i];
    if (reference.empty()) continue;
    ++labelled;
    const std::string* nearest = nullptr;
    double best = -1;
    for (const auto& [intent, answer] : set.intent_answers) {
      const double f1 = char_f1(answers[i], answer);
      if (f1 > best) {
        best = f1;
        nearest = &intent;
      }
    }
    if (nearest != nullptr && *nearest == reference) ++agreed;
  }
  return labelled == 0 ? -1 : double(agreed) / labelled;
}

double refusal_rate(const GateSet& set, const std::vector<std::string>& answers) {
  if (set.out_of_scope.empty() || set.refusal.empty()) return -1;
  int refused = 0;
  for (std::size_t i = 0; i < set.out_of_scope.size() && i < answers.size(); ++i) {
    if (is_refusal(answers[i], set.refusal)) ++refused;
  }
  return double(refused) / double(set.out_of_scope.size());
}

GateVerdict judge(const GateSide& candidate, const GateSide& baseline, const GateTolerance& tolerance) {
  GateVerdict verdict;
  if (candidate.f1 < baseline.f1 - tolerance.f1) {
    verdict.passed = false;
    verdict.reasons.push_back("answer F1 " + figure(candidate.f1) + " < baseline " + figure(baseline.f1) +
                              " - " + figure(tolerance.f1));
  }
  if (candidate.intent_agreement >= 0 && baseline.intent_agreement >= 0 &&
      candidate.intent_agreement < baseline.intent_agreement - tolerance.agreement) {
    verdict.passed = false;
    verdict.reasons.push_back("intent agreement " + figure(candidate.intent_agreement) + " < baseline " +
                              figure(baseline.intent_agreement) + " - " + figure(tolerance.agreement));
  }
  if (candidate.refusal_rate >= 0 && baseline.refusal_rate >= 0 &&
      candidate.refusal_rate < baseline.refusal_rate - tolerance.refusal) {
    verdict.passed = false;
    verdict.reasons.push_back("out-of-scope refusals " + figure(candidate.refusal_rate) + " < baseline " +
                              figure(baseline.refusal_rate) + " - " + figure(tolerance.refusal));
  }
  if (baseline.tokens_per_second > 0 &&
      candidate.tokens_per_second < baseline.tokens_per_second * (1.0 - tolerance.speed)) {
    verdict.passed = false;
    verdict.reasons.push_back("generation " + figure(candidate.tokens_per_second) + " tok/s is more than " +
                              percent(tolerance.speed) + " below the baseline's " +
                              figure(baseline.tokens_per_second));
  }
  return verdict;
}

namespace {

// A figure that was not measured (-1) is null.
nlohmann::json measured(double value) { return value < 0 ? nlohmann::json(nullptr) : nlohmann::json(value); }

nlohmann::json side_json(const GateSide& side) {
  return {{"version", side.version},
          {"kind", side.kind},
          {"rows", side.rows},
          {"f1", side.f1},
          {"exact", side.exact},
          {"intent_agreement", measured(side.intent_agreement)},
          {"refusal_rate", measured(side.refusal_rate)},
          {"tokens_per_second", side.tokens_per_second}};
}

}  // namespace

nlohmann::json gate_json(const std::string& data, const GateSet& set, const GateTolerance& tolerance,
                         const GateSide& baseline, const GateSide& candidate, const GateVerdict& verdict) {
  return {{"data", data},
          {"rows", set.in_scope.size()},
          {"oos_rows", set.out_of_scope.size()},
          {"refusal", set.refusal},
          {"intent_reference", set.intent_reference},
          {"tolerance",
           {{"f1", tolerance.f1}, {"speed", tolerance.speed}, {"agreement", tolerance.agreement}, {"refusal", tolerance.refusal}}},
          {"baseline", side_json(baseline)},
          {"candidate", side_json(candidate)},
          {"passed", verdict.passed},
          {"reasons", verdict.reasons}};
}

}  // namespace hengshi::edge
