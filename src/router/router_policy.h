// RouterPolicy: one immutable snapshot of everything decide() consults — PII patterns and the
// fail-closed message, sensitive signals, the capability matrix, confidence bands (thresholds
// file), latency priors, complexity and session settings. A reload builds and validates a new
// snapshot off to the side and swaps it in whole (policy_store.h), so no request ever sees half
// of one policy and half of another.
//
// The policy file is YAML; every section is optional (embedded defaults):
//   pii:          {enabled, patterns: [{name, regex}], safe_message, non_text_parts: pin|refuse}
//   sensitive:    [{name, keywords: [...], patterns: [...], target: human|cloud-large}]
//   human_message: reply sent when a request is handed to a human
//   capabilities: {<task_type>: {edge: yes|no|partial, max_input_tokens, max_output_tokens,
//   condition}} confidence:   {default_band: {high, low}, middle_band_route (or edge_verify),
//   low_band_route,
//                  out_of_scope_route}
//   complexity:   {cloud_large_at}
//   latency:      {edge_intent_ms, edge_llm_ttft_ms, edge_llm_tokens_per_s, expected_output_tokens,
//                  cloud_p90_prior_ms: {cloud-small, cloud-large}}
//   sessions:     {enabled, window, ttl_s, max_sessions}
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "core/result.h"
#include "router/capability_matrix.h"
#include "router/complexity_model.h"
#include "router/pii_detector.h"
#include "router/sensitive_signals.h"
#include "router/thresholds.h"

namespace hengshi::router {

struct LatencyPolicy {
  double edge_intent_ms = 1.0;          // the intent engine answers in microseconds
  double edge_llm_ttft_ms = 200.0;      // prior until the edge LLM has been measured
  double edge_llm_tokens_per_s = 20.0;  // prior until measured
  int expected_output_tokens = 128;     // answer length assumed when a request sets no max_tokens
  std::map<std::string, double> cloud_p90_prior_ms = {{"cloud-small", 1500.0}, {"cloud-large", 3000.0}};
};

struct ConfidencePolicy {
  // cloud-small | cloud-large | human | edge_verify: the edge's answer, served only when a
  // cheap yes/no check on cloud-small agrees (else cloud-small answers, fallback quality)
  std::string middle_band_route = "cloud-small";
  // Low intent confidence says the FAQ model does not know the question, not that it is hard:
  // cloud-small, unless the complexity score says hard (then cloud-large, complexity_hard).
  std::string low_band_route = "cloud-small";
  std::string out_of_scope_route = "cloud-small";
};

struct SessionPolicy {
  bool enabled = true;
  int window = 3;  // complexity scores remembered per session
  std::int64_t ttl_s = 1800;
  std::int64_t max_sessions = 100000;
};

// What to do with a request that carries parts the PII stage cannot read (images, audio, files):
// it must never reach a cloud pool unchecked.
enum class NonTextParts {
  kPin,     // treated like PII: the edge answers, or the safe message (reason pii_uncheckable)
  kRefuse,  // route refuse with the safe message (reason non_text_refused)
};

struct RouterPolicy {
  std::string source;   // "<embedded policy>" or the file, for messages
  std::string version;  // content hash of policy + thresholds version, reported in every decision
  PiiDetector pii;
  std::string pii_safe_message;
  SensitiveSignals sensitive;
  std::string human_message;
  CapabilityMatrix capabilities;
  Thresholds thresholds;
  LatencyPolicy latency;
  ConfidencePolicy confidence;
  int complexity_cloud_large_at = 4;
  SessionPolicy sessions;
  NonTextParts pii_non_text_parts = NonTextParts::kPin;  // pii.non_text_parts
  // The learned difficulty score (routing.complexity_model, complexity_model.h); null = the
  // hand-written 1..5 score decides the cloud tier (complexity.cloud_large_at).
  std::shared_ptr<const ComplexityModel> complexity_model;
};

// Builds a snapshot from YAML text (policy_source names it in errors), an optional thresholds
// file ("") and an optional complexity model directory (""; its version joins the policy's).
// Errors are Error{"config_invalid", "<file>: <field>: <reason>"}.
Result<std::shared_ptr<const RouterPolicy>> parse_router_policy(
    const std::string& yaml_text, const std::string& policy_source,
    const std::string& thresholds_file, const std::string& complexity_model_dir = "");
// The warning to log at start and on every reload when the policy turns PII detection off (then
// personal data and non-text parts may reach cloud pools), or "" when detection is on.
std::string pii_disabled_warning(const RouterPolicy& policy);

// Same, reading policy_file ("" = the embedded policy).
Result<std::shared_ptr<const RouterPolicy>> load_router_policy(
    const std::string& policy_file, const std::string& thresholds_file,
    const std::string& complexity_model_dir = "");

}  // namespace hengshi::router
