#include "router/decide.h"

#include <algorithm>
#include <array>
#include <cmath>

#include <boost/container/small_vector.hpp>
#include <simdjson.h>

#include "core/json_members.h"

#include "router/complexity.h"
#include "router/complexity_model.h"
#include "router/plan.h"

namespace hengshi::router {

// Keys as string_views: a lookup by `const char*` runs strlen at every comparison of the map walk.
using namespace std::string_view_literals;
namespace {

using nlohmann::json;

bool has_pool(const RouteInput& input, std::string_view pool) {
  return std::find(input.pools.begin(), input.pools.end(), pool) != input.pools.end();
}

// An intent answer the edge may give at all: in scope, with a canned answer.
bool intent_has_answer(const edge::IntentPrediction* prediction) {
  return prediction != nullptr && !prediction->is_oos && !prediction->answer.empty();
}

void set(Decision& decision, Route route, Reason reason, FallbackType fallback_type = FallbackType::none) {
  decision.route = route;
  decision.reason = reason;
  decision.fallback_type = fallback_type;
  decision.edge_engine = EdgeEngine::none;
}

// A route named in the policy (validated there: cloud-small | cloud-large | human).
void set(Decision& decision, const std::string& route, Reason reason,
         FallbackType fallback_type = FallbackType::none) {
  set(decision, route_from_string(route).value_or(Route::cloud_small), reason, fallback_type);
}

void set_edge(Decision& decision, EdgeEngine engine, Reason reason, FallbackType fallback_type = FallbackType::none) {
  set(decision, Route::edge, reason, fallback_type);
  decision.edge_engine = engine;
}

// ---- what route_input() collects for the PII scan ----

// A part kind for the figures: one of the names OpenAI-style APIs use, else "other", so a
// caller's arbitrary (possibly huge or invalid UTF-8) type string never reaches logs.
std::string non_text_kind(std::string_view type) {
  for (std::string_view known : {"image_url", "input_audio", "file", "input_image", "input_file",
                                 "image", "audio", "video", "video_url"}) {
    if (type == known) return std::string(known);
  }
  return "other";
}

void add_non_text(RouteInput& input, std::string kind) {
  input.has_non_text_parts = true;
  if (std::find(input.non_text_kinds.begin(), input.non_text_kinds.end(), kind) ==
      input.non_text_kinds.end()) {
    input.non_text_kinds.push_back(std::move(kind));
  }
}

// The body is read from the request's parse (simdjson's tape) the way its nlohmann DOM reads
// (core/json_members.h): an object's members in the order of their names, a repeated name's
// last value.
using simdjson::dom::element;
using Type = simdjson::dom::element_type;

std::string_view string_of(element value) { return value.get_string().value_unsafe(); }
bool member(element object, std::string_view key, element& out) {
  return last_member(object.get_object().value_unsafe(), key, out);
}

// A content array (a message's or the prediction's): parts other than text cannot be checked;
// the text parts joined WITHOUT a separator catch a number or address split across parts.
void read_content_parts(element content, RouteInput& input) {
  if (content.type() != Type::ARRAY) return;
  std::string joined;
  int text_parts = 0;
  // Named, not temporaries in the range-fors: g++ 12 warns of a dangling tape pointer otherwise.
  const simdjson::dom::array parts = content.get_array().value_unsafe();
  for (element part : parts) {
    element type;
    if (part.type() != Type::OBJECT || !member(part, "type"sv, type) || type.type() != Type::STRING) {
      add_non_text(input, "other");  // parse_chat_request rejects these; fail closed anyway
      continue;
    }
    const std::string_view type_name = string_of(type);
    if (type_name != "text"sv && type_name != "refusal"sv) {
      add_non_text(input, non_text_kind(type_name));
      continue;
    }
    // A text part holds its text under "text", an assistant's refusal part under "refusal".
    if (element text; member(part, type_name, text) && text.type() == Type::STRING) {
      joined += string_of(text);
      ++text_parts;
    }
  }
  if (text_parts >= 2) input.derived_strings.push_back(std::move(joined));
}

// Top-level fields that carry media rather than text, in the order their kinds are reported.
constexpr std::array<std::string_view, 6> kMediaFields = {"input_audio"sv, "image_url"sv, "input_image"sv,
                                                          "file"sv,        "input_file"sv, "image"sv};

// The body's members the router reads, found in one walk over them.
struct BodyFields {
  std::optional<element> messages;
  std::optional<element> prediction;
  std::optional<element> audio;
  std::array<std::optional<element>, kMediaFields.size()> media{};
  bool has_tools = false;  // a non-empty "tools" or "functions" array
};

bool is_null(const std::optional<element>& field) { return !field || field->type() == Type::NULL_VALUE; }

// `members`: the body's, sorted (a repeated name once, with its last value).
BodyFields body_fields(const JsonMembers& members) {
  BodyFields fields;
  for (const auto& [name, value] : members) {
    if (name == "messages"sv) {
      fields.messages = value;
    } else if (name == "prediction"sv) {
      fields.prediction = value;
    } else if (name == "audio"sv) {
      fields.audio = value;
    } else if (name == "tools"sv || name == "functions"sv) {
      fields.has_tools = fields.has_tools ||
                         (value.type() == Type::ARRAY && value.get_array().value_unsafe().size() != 0);
    } else {
      for (std::size_t i = 0; i < kMediaFields.size(); ++i) {
        if (name == kMediaFields[i]) fields.media[i] = value;
      }
    }
  }
  return fields;
}

// "audio" is also the output-audio request ({voice, format}), which carries nothing of the
// caller's; anything more in it is treated as media.
void read_top_level_media(const BodyFields& fields, RouteInput& input) {
  for (std::size_t i = 0; i < kMediaFields.size(); ++i) {
    if (!is_null(fields.media[i])) add_non_text(input, std::string(kMediaFields[i]));
  }
  if (!is_null(fields.audio)) {
    bool settings_only = fields.audio->type() == Type::OBJECT;
    if (settings_only) {
      const JsonMembers members = sorted_members(fields.audio->get_object().value_unsafe());
      for (const auto& [key, value] : members) {
        settings_only = settings_only && (key == "voice"sv || key == "format"sv) && value.type() == Type::STRING;
      }
    }
    if (!settings_only) add_non_text(input, "audio");
  }
}

// The body's strings that RouteInput::texts already holds (string content, and text parts the
// flattened text joins with '\n'), by where their bytes sit in the parse, sorted, so the scan
// reads those bytes once. Only strings whose text demonstrably matches are listed: a
// ChatRequest not flattened from its body (built by hand) just gets them scanned twice.
// Message texts found verbatim in the body, by address (a usual conversation needs no heap).
using CoveredTexts = boost::container::small_vector<const char*, 8>;

CoveredTexts strings_in_texts(const ChatRequest& request, const std::optional<element>& messages) {
  CoveredTexts covered;
  if (!messages || messages->type() != Type::ARRAY) return covered;
  const simdjson::dom::array items = messages->get_array().value_unsafe();
  if (items.size() != request.messages.size()) return covered;
  std::vector<const char*> parts;
  std::size_t i = 0;
  for (element message : items) {
    const std::string& text = request.messages[i++].text;
    element content;
    if (message.type() != Type::OBJECT || !member(message, "content"sv, content)) continue;
    if (content.type() == Type::STRING) {
      if (string_of(content) == text) covered.push_back(string_of(content).data());
      continue;
    }
    if (content.type() != Type::ARRAY) continue;
    parts.clear();
    std::size_t joined_size = 0;
    const simdjson::dom::array parts_of_content = content.get_array().value_unsafe();
    for (element part : parts_of_content) {
      element type;
      element part_text;
      if (part.type() != Type::OBJECT || !member(part, "type"sv, type) || type.type() != Type::STRING ||
          string_of(type) != "text"sv || !member(part, "text"sv, part_text) || part_text.type() != Type::STRING) {
        continue;
      }
      joined_size += string_of(part_text).size() + (parts.empty() ? 0 : 1);
      parts.push_back(string_of(part_text).data());
    }
    if (joined_size == text.size()) covered.insert(covered.end(), parts.begin(), parts.end());
  }
  std::sort(covered.begin(), covered.end());
  return covered;
}

// The digits a JSON number carries, as the PII scan reads them: a whole number in full (a phone
// number sent as 1.3812345678e10 is 13812345678, whatever form the caller wrote), any other as
// nlohmann writes it ("138.5").
std::string number_text(element number) {
  switch (number.type()) {
    case Type::INT64: return std::to_string(number.get_int64().value_unsafe());
    case Type::UINT64: return std::to_string(number.get_uint64().value_unsafe());
    default: break;
  }
  const double value = number.get_double().value_unsafe();
  if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e18) {
    return std::to_string(static_cast<long long>(value));
  }
  return json(value).dump();
}

// Every string value and object key in the body but the gateway's own "hengshi" object,
// iteratively (an explicit stack: no recursion depth to exhaust), each node visited once, in
// the DOM's order. Numbers below the top level, integers or not, are written out: a phone
// number sent as a JSON number in metadata leaves too. Top-level ones (max_tokens, seed,
// temperature) are the API's own parameters. `in_texts` (sorted) are left out: the scan reads
// them in texts.
void collect_forwarded_strings(const JsonMembers& body, const CoveredTexts& in_texts,
                               RouteInput& input) {
  struct Pending {
    element node;
    int depth;  // the body itself is 0, its fields 1
  };
  // Inline room for a usual chat body's nesting; a deeper or wider one spills to the heap.
  boost::container::small_vector<Pending, 32> stack;
  const auto push_members = [&](const JsonMembers& members, int depth) {
    for (const auto& [key, value] : members) {
      input.forwarded_strings.emplace_back(key);
      stack.push_back({value, depth});
    }
  };
  push_members(body, 1);
  while (!stack.empty()) {
    const Pending pending = stack.back();
    stack.pop_back();
    const element node = pending.node;
    switch (node.type()) {
      case Type::STRING:
        if (!std::binary_search(in_texts.begin(), in_texts.end(), string_of(node).data())) {
          input.forwarded_strings.emplace_back(string_of(node));
        }
        break;
      case Type::INT64:
      case Type::UINT64:
      case Type::DOUBLE:
        if (pending.depth >= 2) input.derived_strings.push_back(number_text(node));
        break;
      case Type::OBJECT:
        if (pending.depth >= kMaxScanDepth) {
          add_non_text(input, "nesting_too_deep");
          break;
        }
        push_members(sorted_members(node.get_object().value_unsafe()), pending.depth + 1);
        break;
      case Type::ARRAY: {
        if (pending.depth >= kMaxScanDepth) {
          add_non_text(input, "nesting_too_deep");
          break;
        }
        const simdjson::dom::array items = node.get_array().value_unsafe();
        for (element item : items) stack.push_back({item, pending.depth + 1});
        break;
      }
      case Type::BOOL:
      case Type::NULL_VALUE:
        break;
    }
  }
}

}  // namespace

RouteInput route_input(const ChatRequest& request, const Budget& budget) {
  RouteInput input;
  input.model = request.model;
  input.texts.reserve(request.messages.size());
  for (const auto& message : request.messages) input.texts.emplace_back(message.text);
  // last_user_text() returns by value; find the message itself so the view stays valid.
  for (auto it = request.messages.rbegin(); it != request.messages.rend(); ++it) {
    if (it->role == "user"sv) {
      input.last_user_text = it->text;
      break;
    }
  }
  input.turns = static_cast<int>(request.messages.size());
  input.task_type = request.hengshi.task_type;
  input.session_id = request.hengshi.session_id;
  input.budget = budget;
  input.input_tokens = approx_prompt_tokens(request.messages);
  input.requested_output_tokens =
      request.max_tokens ? static_cast<int>(std::min<std::int64_t>(*request.max_tokens, 1 << 30)) : 0;
  input.wants_structured_output =
      request.response_format == "json_schema"sv || request.response_format == "json_object"sv;
  element root;
  if (!request.body_root(root) || root.type() != Type::OBJECT) return input;
  // The gateway's own object never goes upstream: not read.
  JsonMembers members = sorted_members(root.get_object().value_unsafe());
  members.erase(std::remove_if(members.begin(), members.end(),
                               [](const JsonMember& m) { return m.key == "hengshi"sv; }),
                members.end());
  const BodyFields fields = body_fields(members);
  input.has_tools = fields.has_tools;

  // The PII scan reads everything that would go upstream, not only the flattened messages: a
  // chat body's keys and values are a few dozen, grown one doubling at a time otherwise.
  input.forwarded_strings.reserve(32);
  collect_forwarded_strings(members, strings_in_texts(request, fields.messages), input);
  if (fields.messages && fields.messages->type() == Type::ARRAY) {
    const simdjson::dom::array messages = fields.messages->get_array().value_unsafe();
    for (element message : messages) {
      if (element content; message.type() == Type::OBJECT && member(message, "content"sv, content)) {
        read_content_parts(content, input);
      }
    }
  }
  if (element content; fields.prediction && fields.prediction->type() == Type::OBJECT &&
                       member(*fields.prediction, "content"sv, content)) {
    read_content_parts(content, input);
  }
  read_top_level_media(fields, input);
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

namespace {

Decision decide_route(const RouteInput& input, const RouterPolicy& policy, RouterRuntime& runtime,
                      std::chrono::steady_clock::time_point now) {
  Decision decision;
  json& figures = decision.figures;
  figures["policy"] = policy.version;
  const edge::IntentPrediction* prediction = input.prediction;
  if (prediction != nullptr) {
    decision.intent = prediction->intent;
    decision.confidence = prediction->confidence;
    decision.intent_confidence = prediction->intent_confidence;
    decision.in_scope = prediction->in_scope;
  }
  const Band band = policy.thresholds.band(input.task_type, prediction ? prediction->intent : "");
  // Scored up front so every turn, short-circuited or not, records its real score in the session.
  // The complexity cues and the sensitive signals come from one pass over the text.
  ComplexityFeatures complexity_inputs =
      complexity_features_without_cues(input.last_user_text, input.turns);
  const std::optional<SignalMatch> signal =
      policy.sensitive.match(input.last_user_text, complexity_inputs);
  const int complexity = complexity_score(complexity_inputs);
  figures["complexity"] = complexity;
  // Is this cloud-bound request hard enough for cloud-large? The learned model when configured
  // (scored only when asked: most requests never reach a tier choice), else the hand score.
  const ComplexityModel* complexity_model = policy.complexity_model.get();
  std::optional<bool> hard_verdict;
  auto is_hard = [&]() -> bool {
    if (!hard_verdict) {
      if (complexity_model != nullptr) {
        const double score = complexity_model->score(complexity_inputs, input.last_user_text);
        figures["complexity_score"] = score;
        figures["complexity_cut"] = complexity_model->cut();
        hard_verdict = complexity_model->is_hard(score);
        figures["complexity_verdict"] = *hard_verdict ? "hard" : "not_hard";
      } else {
        hard_verdict = complexity >= policy.complexity_cloud_large_at;
      }
    }
    return *hard_verdict;
  };
  auto record_session = [&](int score) {
    if (!policy.sessions.enabled || input.session_id.empty()) return;
    figures["session_cloud_calls"] =
        runtime.sessions().record(input.session_id, score, std::string(to_string(decision.route)), now);
  };

  // 1. Hard constraints. PII: everything that would be forwarded — history, tool calls, metadata —
  // because all of it goes upstream. Off entirely when the policy disables detection.
  if (policy.pii.enabled()) {
    json kinds;  // null until a match: json::array() allocates its vector for every request
    const auto scan = [&](std::string_view text) {
      for (const auto& match : policy.pii.find(text)) {
        if (std::find(kinds.begin(), kinds.end(), match.kind) == kinds.end())
          kinds.push_back(match.kind);
      }
    };
    for (std::string_view text : input.texts) scan(text);
    for (std::string_view text : input.forwarded_strings) scan(text);
    for (const std::string& text : input.derived_strings) scan(text);
    const bool has_pii = !kinds.empty();
    if (has_pii || input.has_non_text_parts) {
      if (has_pii) figures["pii"] = std::move(kinds);
      if (input.has_non_text_parts) figures["non_text_parts"] = input.non_text_kinds;
      // Never a cloud upstream: refused outright by policy, or the edge answers, or the safe
      // message does (fail closed).
      const Reason reason = has_pii ? Reason::pii_pin : Reason::pii_uncheckable;
      if (input.has_non_text_parts && policy.pii_non_text_parts == NonTextParts::kRefuse) {
        set(decision, Route::refuse, Reason::non_text_refused);
      } else if (intent_has_answer(prediction) && prediction->confidence >= band.high) {
        set_edge(decision, EdgeEngine::intent, reason);
      } else if (input.llm_available) {
        set_edge(decision, EdgeEngine::llm, reason);
      } else {
        set(decision, Route::refuse, reason);
      }
      record_session(complexity);
      return decision;
    }
  }
  if (signal) {
    figures["signal"] = signal->rule;
    set(decision, signal->target, Reason::sensitive_signal);
    // While offline only a hand-off still makes sense; a cloud target becomes an offline plan.
    if (!input.offline || decision.route == Route::human) {
      record_session(complexity);
      return decision;
    }
  }

  // Offline: the cloud is unreachable, so only the edge (at its offline band) or the last
  // resort can answer; every answer says so.
  if (input.offline) {
    figures["offline_threshold"] = input.offline_threshold;
    if (intent_has_answer(prediction) && prediction->confidence >= input.offline_threshold) {
      set_edge(decision, EdgeEngine::intent, Reason::offline);
    } else if (input.llm_available) {
      set_edge(decision, EdgeEngine::llm, Reason::offline);
    } else {
      set(decision, Route::refuse, Reason::offline);
    }
    record_session(complexity);
    return decision;
  }

  // 2. Pins by model name.
  if (input.model == "edge-llm"sv) {
    set_edge(decision, EdgeEngine::llm, Reason::model_pinned);
    record_session(complexity);
    return decision;
  }
  if ((input.model == "cloud-small"sv || input.model == "cloud-large"sv) &&
      has_pool(input, input.model)) {
    set(decision, input.model, Reason::model_pinned);
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
    set(decision, is_hard() ? Route::cloud_large : Route::cloud_small, Reason::capability_miss);
    record_session(complexity);
    return decision;
  }

  // 4. A budget already spent gets a clear answer at once.
  const std::int64_t remaining_ms = input.budget.remaining().count();  // real time, whatever `now` a test passes
  figures["remaining_ms"] = remaining_ms;
  if (remaining_ms <= 0) {
    set(decision, Route::refuse, Reason::deadline_exceeded);
    return decision;
  }

  // 5. Complexity, with session hysteresis: while the session's last `window` turns average at
  // or above the cut, it stays on cloud-large even for a simple turn, so the answers' style does
  // not flip turn by turn; the window slides, so a run of simple turns brings it back.
  // With a learned model this stage is off: the model only picks the tier of requests bound for
  // the cloud anyway (below), it never takes one from an edge that knows the answer.
  bool sticky = false;
  if (complexity_model == nullptr && policy.sessions.enabled && !input.session_id.empty()) {
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
  // A band that sends a request to cloud-small sends it to cloud-large instead when it is hard:
  // the intent model's doubt says the FAQ does not know the question, not that it is difficult.
  auto tiered = [&](const std::string& route, Reason reason, FallbackType fallback_type) {
    if (route == "cloud-small"sv && has_pool(input, "cloud-large") && is_hard()) {
      set(decision, Route::cloud_large, Reason::complexity_hard, fallback_type);
    } else {
      set(decision, route, reason, fallback_type);
    }
  };
  if (complexity_model == nullptr && complexity >= policy.complexity_cloud_large_at) {
    set(decision, Route::cloud_large, Reason::complexity_high);
  } else if (sticky) {
    set(decision, Route::cloud_large, Reason::session_sticky);
  } else if (prediction == nullptr) {
    tiered(input.default_pool, Reason::default_pool, FallbackType::none);
  } else if (prediction->is_oos) {
    tiered(policy.confidence.out_of_scope_route, Reason::out_of_scope, FallbackType::quality);
  } else if (prediction->confidence >= band.high && intent_has_answer(prediction)) {
    set_edge(decision, EdgeEngine::intent, Reason::high_confidence);
  } else if (prediction->confidence >= band.low) {
    const bool verify = policy.confidence.middle_band_route == "edge_verify"sv;
    if (verify && intent_has_answer(prediction) && has_pool(input, "cloud-small")) {
      // The edge's answer, pending a yes/no check by cloud-small (the server runs it).
      set_edge(decision, EdgeEngine::intent, Reason::middle_band_verify);
      figures["verify_pool"] = "cloud-small";
    } else {
      // Without an answer or a judge to check it, edge_verify falls back to cloud-small.
      set(decision, verify ? std::string("cloud-small") : policy.confidence.middle_band_route,
          Reason::middle_band, FallbackType::quality);
    }
  } else {
    tiered(policy.confidence.low_band_route, Reason::low_confidence, FallbackType::quality);
  }

  // 7. Latency gate: does the chosen cloud pool fit what is left of the budget?
  if (is_cloud(decision.route)) {
    const std::string chosen(to_string(decision.route));
    const double p90 = runtime.cloud_p90_ms(policy, chosen, now);
    figures["p90_ms"] = p90;
    if (p90 > static_cast<double>(remaining_ms)) {
      const int expected_tokens = input.requested_output_tokens > 0
                                      ? input.requested_output_tokens
                                      : policy.latency.expected_output_tokens;
      const double llm_eta = runtime.edge_llm_eta_ms(expected_tokens);
      const std::string other = decision.route == Route::cloud_small ? "cloud-large" : "cloud-small";
      const double other_p90 = runtime.cloud_p90_ms(policy, other, now);
      if (intent_has_answer(prediction) && prediction->confidence >= band.low &&
          policy.latency.edge_intent_ms <= static_cast<double>(remaining_ms)) {
        set_edge(decision, EdgeEngine::intent, Reason::latency_pressure, FallbackType::timeout);
        figures["edge_eta_ms"] = policy.latency.edge_intent_ms;
      } else if (input.llm_available && llm_eta <= static_cast<double>(remaining_ms)) {
        set_edge(decision, EdgeEngine::llm, Reason::latency_pressure, FallbackType::timeout);
        figures["edge_eta_ms"] = llm_eta;
      } else if (has_pool(input, other) && other_p90 <= static_cast<double>(remaining_ms)) {
        set(decision, other, Reason::latency_pressure, FallbackType::timeout);
        figures["p90_ms"] = other_p90;
      } else {
        decision.reason = Reason::latency_pressure;  // nothing fits: keep the choice, say so
        figures["nothing_fits"] = true;
      }
    }
  }
  record_session(complexity);
  return decision;
}

}  // namespace

Decision decide(const RouteInput& input, const RouterPolicy& policy, RouterRuntime& runtime,
                std::chrono::steady_clock::time_point now) {
  Decision decision = decide_route(input, policy, runtime, now);
  PlanInputs plan_inputs;
  plan_inputs.intent_answer = intent_has_answer(input.prediction);
  plan_inputs.llm_available = input.llm_available;
  plan_inputs.pools = input.pools;
  plan_inputs.last_resort = input.last_resort;
  decision.plan = make_plan(decision, plan_inputs);
  return decision;
}

}  // namespace hengshi::router
