#include "edge/gate_verdict.h"

#include <cstdio>

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

GateVerdict judge(const GateSide& candidate, const GateSide& baseline, const GateTolerance& tolerance) {
  GateVerdict verdict;
  if (candidate.f1 < baseline.f1 - tolerance.f1) {
    verdict.passed = false;
    verdict.reasons.push_back("answer F1 " + figure(candidate.f1) + " < baseline " + figure(baseline.f1) +
                              " - " + figure(tolerance.f1));
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

}  // namespace hengshi::edge
