#include "core/decision.h"

#include <algorithm>

namespace hengshi {

bool Plan::includes_cloud() const {
  return std::any_of(steps.begin(), steps.end(), [](const PlanStep& step) { return is_cloud(step.source); });
}

std::string_view to_string(Route route) {
  switch (route) {
    case Route::edge: return "edge";
    case Route::cloud_small: return "cloud-small";
    case Route::cloud_large: return "cloud-large";
    case Route::human: return "human";
    case Route::refuse: return "refuse";
  }
  return "refuse";
}

std::optional<Route> route_from_string(std::string_view name) {
  for (Route route : {Route::edge, Route::cloud_small, Route::cloud_large, Route::human, Route::refuse}) {
    if (to_string(route) == name) return route;
  }
  return std::nullopt;
}

std::optional<Source> source_from_string(std::string_view name) {
  for (Source source : {Source::edge_intent, Source::edge_intent_verified, Source::edge_llm, Source::cloud_small,
                        Source::cloud_large, Source::human_handoff, Source::safe_reply, Source::last_resort_reply,
                        Source::cache}) {
    if (to_string(source) == name) return source;
  }
  return std::nullopt;
}

std::string_view to_string(EdgeEngine engine) {
  switch (engine) {
    case EdgeEngine::none: return "";
    case EdgeEngine::intent: return "intent";
    case EdgeEngine::llm: return "llm";
  }
  return "";
}

std::string_view to_string(FallbackType type) {
  switch (type) {
    case FallbackType::none: return "";
    case FallbackType::quality: return "quality";
    case FallbackType::timeout: return "timeout";
    case FallbackType::capability: return "capability";
  }
  return "";
}

std::string_view to_string(Reason reason) {
  switch (reason) {
    case Reason::model_pinned: return "model_pinned";
    case Reason::default_pool: return "default_pool";
    case Reason::pii_pin: return "pii_pin";
    case Reason::pii_uncheckable: return "pii_uncheckable";
    case Reason::non_text_refused: return "non_text_refused";
    case Reason::sensitive_signal: return "sensitive_signal";
    case Reason::capability_miss: return "capability_miss";
    case Reason::deadline_exceeded: return "deadline_exceeded";
    case Reason::complexity_high: return "complexity_high";
    case Reason::complexity_hard: return "complexity_hard";
    case Reason::session_sticky: return "session_sticky";
    case Reason::out_of_scope: return "out_of_scope";
    case Reason::high_confidence: return "high_confidence";
    case Reason::middle_band: return "middle_band";
    case Reason::middle_band_verify: return "middle_band_verify";
    case Reason::low_confidence: return "low_confidence";
    case Reason::latency_pressure: return "latency_pressure";
    case Reason::offline: return "offline";
  }
  return "unknown";
}

std::string_view to_string(Level level) {
  switch (level) {
    case Level::edge: return "L0";
    case Level::edge_degraded: return "L1";
    case Level::cloud_small: return "L2";
    case Level::cloud_large: return "L3";
    case Level::last_resort: return "L4";
  }
  return "L4";
}

std::string_view to_string(Source source) {
  switch (source) {
    case Source::edge_intent: return "edge_intent";
    case Source::edge_intent_verified: return "edge_intent_verified";
    case Source::edge_llm: return "edge_llm";
    case Source::cloud_small: return "cloud-small";
    case Source::cloud_large: return "cloud-large";
    case Source::human_handoff: return "human_handoff";
    case Source::safe_reply: return "safe_reply";
    case Source::last_resort_reply: return "last_resort_reply";
    case Source::cache: return "cache";
  }
  return "last_resort_reply";
}

AnswerKind answer_kind(Source source) {
  switch (source) {
    case Source::human_handoff: return AnswerKind::handoff;
    case Source::safe_reply:
    case Source::last_resort_reply: return AnswerKind::canned;
    default: return AnswerKind::model;
  }
}

std::string_view to_string(AnswerKind kind) {
  switch (kind) {
    case AnswerKind::model: return "model";
    case AnswerKind::canned: return "canned";
    case AnswerKind::handoff: return "handoff";
    case AnswerKind::stale: return "stale";
  }
  return "model";
}

}  // namespace hengshi
