#include "router/decide.h"

#include <algorithm>
#include <cmath>

#include "router/complexity.h"

namespace hengshi::router {
namespace {

using nlohmann::json;

bool has_pool(const RouteInput& input, std::string_view pool) {
  return std::find(input.pools.begin(), input.pools.end(), pool) != input.pools.end();
}

bool is_cloud(std::string_view route) { return route == "cloud-small" || route == "cloud-large"; }

// An intent answer the edge may give at all: in scope, with a canned answer.
bool intent_has_answer(const edge::IntentPrediction* prediction) {
  return prediction != nullptr && !prediction->is_oos && !prediction->answer.empty();
}

void set(Decision& decision, std::string route, std::string reason, std::string fallback_type = {}) {
  decision.route = std::move(route);
  decision.reason = std::move(reason);
  decision.fallback_type = std::move(fallback_type);
  decision.edge_engine.clear();
}

void set_edge(Decision& decision, std::string engine, std::string reason, std::string fallback_type = {}) {
  set(decision, "edge", std::move(reason), std::move(fallback_type));
  decision.edge_engine = std::move(engine);
}

}  // namespace

RouteInput route_input(const ChatRequest& request, std::int64_t remaining_ms) {
  RouteInput input;
  input.model = request.model;
  input.texts.reserve(request.messages.size());
  for (const auto& message : request.messages) input.texts.emplace_back(message.text);
  // last_user_text() returns by value; find the message itself so the view stays valid.
  for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it) {
    if (it->role == "user") {
      input.last_user_text = it->text;
      break;
    }
  }
  input.turns = static_cast<int>(request.messages.size());
  input.task_type = request.hengshi.task_type;
  input.session_id = request.hengshi.session_id;
  input.remaining_ms = remaining_ms;
  input.input_tokens = approx_prompt_tokens(request.messages);
  input.requested_output_tokens =
      request.max_tokens ? static_cast<int>(std::min<std::int64_t>(*request.max_tokens, 1 << 30)) : 0;
  if (auto it = request.body.find("response_format"); it != request.body.end() && it->is_object()) {
    const std::string type = it->value("type", "");
    input.wants_structured_output = type == "json_schema" || type == "json_object";
  }
  for (const char* key : {"tools", "functions"}) {
    if (auto it = request.body.find(key); it != request.body.end() && it->is_array() && !it->empty()) {
      input.has_tools = true;
    }
  }
  return input;
}

RouterRuntime::RouterRuntime(const RouterPolicy& policy)
    : edge_llm_(policy.latency.edge_llm_ttft_ms, policy.latency.edge_llm_tokens_per_s),
      sessions_(static_cast<std::size_t>(policy.sessions.max_sessions),
                std::chrono::seconds(policy.sessions.ttl_s), static_cast<std::size_t>(policy.sessions.window)) {
  for (const char* pool : {"cloud-small", "cloud-large"}) {
    cloud_latency_[pool] = std::make_unique<SlidingQuantile>();
  }
}

void RouterRuntime::observe_cloud_latency(const std::string& pool, double latency_ms,
                                          std::chrono::steady_clock::time_point now) {
  if (auto it = cloud_latency_.find(pool); it != cloud_latency_.end()) it->second->observe(latency_ms, now);
}

void RouterRuntime::observe_edge_llm(double ttft_ms, int tokens, double generation_ms) {
  edge_llm_.observe(ttft_ms, tokens, generation_ms);
}

double RouterRuntime::cloud_p90_ms(const RouterPolicy& policy, const std::string& pool,
                                   std::chrono::steady_clock::time_point now) const {
  if (auto it = cloud_latency_.find(pool); it != cloud_latency_.end()) {
    if (auto p90 = it->second->quantile(0.9, now)) return *p90;
  }
  auto prior = policy.latency.cloud_p90_prior_ms.find(pool);
  return prior != policy.latency.cloud_p90_prior_ms.end() ? prior->second : 0.0;
}

Decision decide(const RouteInput& input, const RouterPolicy& policy, RouterRuntime& runtime,
                std::chrono::steady_clock::time_point now) {
  Decision decision;
  json& figures = decision.figures;
  figures["policy"] = policy.version;
  const edge::IntentPrediction* prediction = input.prediction;
  if (prediction != nullptr) {
    decision.intent = prediction->intent;
    decision.confidence = prediction->confidence;
  }
  const Band band = policy.thresholds.band(input.task_type, prediction ? prediction->intent : "");
  // Scored up front so every turn, short-circuited or not, records its real score in the session.
  const int complexity = complexity_score(complexity_features(input.last_user_text, input.turns));
  figures["complexity"] = complexity;
  auto record_session = [&](int score) {
    if (!policy.sessions.enabled || input.session_id.empty()) return;
    figures["session_cloud_calls"] = runtime.sessions().record(input.session_id, score, decision.route, now);
  };

  // 1. Hard constraints. PII: every message, because history goes upstream too.
  if (std::any_of(input.texts.begin(), input.texts.end(),
                  [&](std::string_view text) { return policy.pii.contains(text); })) {
    json kinds = json::array();
    for (std::string_view text : input.texts) {
      for (const auto& match : policy.pii.find(text)) {
        if (std::find(kinds.begin(), kinds.end(), match.kind) == kinds.end()) kinds.push_back(match.kind);
      }
    }
    figures["pii"] = std::move(kinds);
    // Fail closed: the edge answers, or the safe message does. Never a cloud upstream.
    if (intent_has_answer(prediction) && prediction->confidence >= band.high) {
      set_edge(decision, "intent", "pii_pin");
    } else if (input.llm_available) {
      set_edge(decision, "llm", "pii_pin");
    } else {
      set(decision, "refuse", "pii_pin");
    }
    record_session(complexity);
    return decision;
  }
  if (auto signal = policy.sensitive.match(input.last_user_text)) {
    figures["signal"] = signal->rule;
    set(decision, signal->target, "sensitive_signal");
    record_session(complexity);
    return decision;
  }

  // 2. Pins by model name.
  if (input.model == "edge-llm") {
    set_edge(decision, "llm", "model_pinned");
    record_session(complexity);
    return decision;
  }
  if (is_cloud(input.model) && has_pool(input, input.model)) {
    set(decision, input.model, "model_pinned");
    record_session(complexity);
    return decision;
  }

  // 3. Capability admission.
  bool unknown_task = false;
  CapabilityRequest capability_request{input.input_tokens, input.requested_output_tokens,
                                       input.wants_structured_output, input.has_tools};
  const CapabilityVerdict verdict = policy.capabilities.admit(input.task_type, capability_request, &unknown_task);
  if (unknown_task) figures["task_type_unknown"] = true;
  if (!verdict.edge_allowed) {
    figures["capability"] = verdict.reason;
    set(decision, complexity >= policy.complexity_cloud_large_at ? "cloud-large" : "cloud-small",
        "capability_miss");
    record_session(complexity);
    return decision;
  }

  // 4. A budget already spent gets a clear answer at once.
  figures["remaining_ms"] = input.remaining_ms;
  if (input.remaining_ms <= 0) {
    set(decision, "refuse", "deadline_exceeded");
    return decision;
  }

  // 5. Complexity, with session hysteresis: while the session's last `window` turns average at
  // or above the cut, it stays on cloud-large even for a simple turn, so the answers' style does
  // not flip turn by turn; the window slides, so a run of simple turns brings it back.
  bool sticky = false;
  if (policy.sessions.enabled && !input.session_id.empty()) {
    SessionView view = runtime.sessions().view(input.session_id, now);
    if (view.known && !view.recent_complexity.empty()) {
      const double mean = mean_complexity(view);
      figures["complexity_session_mean"] = mean;
      sticky = mean >= policy.complexity_cloud_large_at;
    }
  }

  // 6. Confidence bands (and complexity) choose the first-choice route.
  if (prediction != nullptr) {
    figures["band_high"] = band.high;
    figures["band_low"] = band.low;
    figures["margin"] = prediction->margin;
  }
  if (complexity >= policy.complexity_cloud_large_at) {
    set(decision, "cloud-large", "complexity_high");
  } else if (sticky) {
    set(decision, "cloud-large", "session_sticky");
  } else if (prediction == nullptr) {
    set(decision, input.default_pool, "default_pool");
  } else if (prediction->is_oos) {
    set(decision, policy.confidence.out_of_scope_route, "out_of_scope", "quality");
  } else if (prediction->confidence >= band.high && intent_has_answer(prediction)) {
    set_edge(decision, "intent", "high_confidence");
  } else if (prediction->confidence >= band.low) {
    const bool verify = policy.confidence.middle_band_route == "edge_verify";
    if (verify && intent_has_answer(prediction) && has_pool(input, "cloud-small")) {
      // The edge's answer, pending a yes/no check by cloud-small (the server runs it).
      set_edge(decision, "intent", "middle_band_verify");
      figures["verify_pool"] = "cloud-small";
    } else {
      // Without an answer or a judge to check it, edge_verify falls back to cloud-small.
      set(decision, verify ? "cloud-small" : policy.confidence.middle_band_route, "middle_band", "quality");
    }
  } else {
    set(decision, policy.confidence.low_band_route, "low_confidence", "quality");
  }

  // 7. Latency gate: does the chosen cloud pool fit what is left of the budget?
  if (is_cloud(decision.route)) {
    const double p90 = runtime.cloud_p90_ms(policy, decision.route, now);
    figures["p90_ms"] = p90;
    if (p90 > static_cast<double>(input.remaining_ms)) {
      const int expected_tokens = input.requested_output_tokens > 0
                                      ? input.requested_output_tokens
                                      : policy.latency.expected_output_tokens;
      const double llm_eta = runtime.edge_llm_eta_ms(expected_tokens);
      const std::string other = decision.route == "cloud-small" ? "cloud-large" : "cloud-small";
      const double other_p90 = runtime.cloud_p90_ms(policy, other, now);
      if (intent_has_answer(prediction) && prediction->confidence >= band.low &&
          policy.latency.edge_intent_ms <= static_cast<double>(input.remaining_ms)) {
        set_edge(decision, "intent", "latency_pressure", "timeout");
        figures["edge_eta_ms"] = policy.latency.edge_intent_ms;
      } else if (input.llm_available && llm_eta <= static_cast<double>(input.remaining_ms)) {
        set_edge(decision, "llm", "latency_pressure", "timeout");
        figures["edge_eta_ms"] = llm_eta;
      } else if (has_pool(input, other) && other_p90 <= static_cast<double>(input.remaining_ms)) {
        set(decision, other, "latency_pressure", "timeout");
        figures["p90_ms"] = other_p90;
      } else {
        decision.reason = "latency_pressure";  // nothing fits: keep the choice, say so
        figures["nothing_fits"] = true;
      }
    }
  }
  record_session(complexity);
  return decision;
}

}  // namespace hengshi::router
