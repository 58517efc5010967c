// Decision: where a request goes, why, and the plan of levels that will answer it — written once
// at the decision point (router::decide) and carried into the response metadata, the request
// log and the metrics (the operator's 3 a.m. view). Every field is typed; to_string() gives the
// stable wire names clients, logs and metrics see.
//
// The plan is the degradation chain for this request (DESIGN-NOTES "The chain"): an ordered list
// of steps, each a level and the source that answers at it. chain::execute walks it; nothing
// else reads the route to decide what to call.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <string_view>

#include <boost/container/small_vector.hpp>
#include <nlohmann/json.hpp>

namespace hengshi {

enum class Route { edge, cloud_small, cloud_large, human, refuse };
enum class EdgeEngine { none, intent, llm };
enum class FallbackType { none, quality, timeout, capability };
enum class Reason {
  model_pinned,
  default_pool,
  pii_pin,
  pii_uncheckable,
  non_text_refused,
  sensitive_signal,
  capability_miss,
  deadline_exceeded,
  complexity_high,
  // Low confidence, out of scope or no intent engine, and the learned complexity score at or
  // above its cut: cloud-large instead of the band's cloud-small (issue 10).
  complexity_hard,
  session_sticky,
  out_of_scope,
  high_confidence,
  middle_band,
  middle_band_verify,
  low_confidence,
  latency_pressure,
  offline,
};

// The levels of the degradation chain, in the order they degrade.
enum class Level {
  edge = 0,           // L0 edge native: the intent engine or the edge LLM
  edge_degraded = 1,  // L1 the edge LLM again, context 70%, few-shot off, output halved
  cloud_small = 2,    // L2
  cloud_large = 3,    // L3
  last_resort = 4,    // L4 the canned reply or the human hand-off
};

// What answers at a step.
enum class Source {
  edge_intent,           // the intent engine's canned answer
  edge_intent_verified,  // the same, served only when cloud-small confirms it (middle band)
  edge_llm,              // the embedded LLM (degraded at L1)
  cloud_small,
  cloud_large,
  human_handoff,         // policy.human_message
  safe_reply,            // policy.pii_safe_message: PII that may not leave and no edge answer
  last_resort_reply,     // chain.last_resort.message: everything before it failed
  cache,                 // a cached answer (src/cache/): never a plan step, a stage before the plan
};

// Who an answer really comes from: a model (edge or cloud), or the gateway itself — a canned
// reply (the last resort, the PII safe reply) or a human hand-off. A 200 is not an answer:
// metrics, logs and benchmarks count model answers apart from the gateway's own.
// A stale cache entry (served at L4 instead of the canned reply) is a model's old answer: degraded.
enum class AnswerKind { model, canned, handoff, stale };
AnswerKind answer_kind(Source source);
std::string_view to_string(AnswerKind kind);

struct PlanStep {
  Level level;
  Source source;
  bool operator==(const PlanStep&) const = default;
};

struct Plan {
  // Empty: nothing answers (a typed refusal, e.g. deadline_exceeded). Inline room for the longest
  // plan make_plan() builds (the intent engine, the edge LLM at L0 and L1, both pools, a last
  // resort), so a request does not grow a vector.
  boost::container::small_vector<PlanStep, 6> steps;
  bool pinned = false;          // the caller named the model: no other pool stands in for it
  bool includes_cloud() const;
};

std::string_view to_string(Route route);
std::string_view to_string(EdgeEngine engine);  // "" for none
std::string_view to_string(FallbackType type);  // "" for none
std::string_view to_string(Reason reason);
std::string_view to_string(Level level);        // "L0".."L4"
std::string_view to_string(Source source);
// The pool a cloud route or source names ("cloud-small" / "cloud-large"); "" otherwise.
std::optional<Route> route_from_string(std::string_view name);
// The Source a wire name (to_string(Source): answered_by, hop sources) stands for; none if unknown.
std::optional<Source> source_from_string(std::string_view name);
inline bool is_cloud(Route route) { return route == Route::cloud_small || route == Route::cloud_large; }
inline bool is_cloud(Source source) { return source == Source::cloud_small || source == Source::cloud_large; }
// Reasons that keep a request's text on the edge (and out of the request log's text field).
inline bool is_pii_reason(Reason reason) {
  return reason == Reason::pii_pin || reason == Reason::pii_uncheckable || reason == Reason::non_text_refused;
}
inline bool is_edge(Source source) {
  return source == Source::edge_intent || source == Source::edge_intent_verified || source == Source::edge_llm;
}

// For gtest and logs.
inline std::ostream& operator<<(std::ostream& out, Route v) { return out << to_string(v); }
inline std::ostream& operator<<(std::ostream& out, Reason v) { return out << to_string(v); }
inline std::ostream& operator<<(std::ostream& out, EdgeEngine v) { return out << to_string(v); }
inline std::ostream& operator<<(std::ostream& out, FallbackType v) { return out << to_string(v); }
inline std::ostream& operator<<(std::ostream& out, Level v) { return out << to_string(v); }
inline std::ostream& operator<<(std::ostream& out, Source v) { return out << to_string(v); }

struct Decision {
  Route route = Route::refuse;
  Reason reason = Reason::default_pool;
  FallbackType fallback_type = FallbackType::none;
  // The intent model's numbers, when it ran. `confidence` = intent_confidence × in_scope: the
  // routing score the bands gate on (calibrate fits them at the out-of-scope share it was given,
  // noted in the thresholds file). `intent_confidence` is P(intent right | in scope), the number
  // to read on traffic known to be in scope; `in_scope` is P(in scope) at the share the trainer
  // assumed (the model's manifest).
  std::optional<double> confidence;
  std::optional<double> intent_confidence;
  std::optional<double> in_scope;
  std::string intent;
  EdgeEngine edge_engine = EdgeEngine::none;  // set when route is edge
  Plan plan;
  // The numbers the decision used (thresholds, scores, the policy version), for the log and the
  // admin view. Write-only for everyone after decide(): nothing steers on them. Null until the
  // first `figures["x"] = …` makes it an object (empty() is true either way): every request
  // default-constructs a Decision in its ResponseMeta, and an empty object is an allocation.
  nlohmann::json figures;
};

}  // namespace hengshi
