#include "core/response_meta.h"

#include "core/json_text.h"

namespace hengshi {

using nlohmann::json;

namespace {
json or_null(std::string_view s) { return s.empty() ? json(nullptr) : json(std::string(s)); }
}  // namespace

json to_json(const Plan& plan) {
  json steps = json::array();
  for (const auto& step : plan.steps) {
    steps.push_back(std::string(to_string(step.level)) + ":" + std::string(to_string(step.source)));
  }
  return steps;
}

json to_json(const HopRecord& hop) {
  json attempts = json::array();
  for (const auto& attempt : hop.attempts) {
    json a = {{"ms", attempt.ms}, {"outcome", attempt.error.empty() ? "ok" : attempt.error}};
    if (!attempt.upstream.empty()) a["upstream"] = attempt.upstream;
    if (attempt.member_open) a["member_open"] = true;
    attempts.push_back(std::move(a));
  }
  return {{"level", to_string(hop.level)},
          {"source", to_string(hop.source)},
          {"outcome", hop.outcome},
          {"ms", hop.ms},
          {"attempts", std::move(attempts)}};
}

json ResponseMeta::to_json(bool with_figures) const {
  json out = {
      {"request_id", request_id},
      {"route", to_string(decision.route)},
      {"reason", to_string(decision.reason)},
      {"level", level},
      {"answered_by", or_null(answered_by)},
      {"answer_kind", answer_kind ? json(std::string(to_string(*answer_kind))) : json(nullptr)},
      {"fallback_type", or_null(to_string(decision.fallback_type))},
      {"confidence", decision.confidence ? json(*decision.confidence) : json(nullptr)},
      {"intent", or_null(decision.intent)},
      {"cache", cache},
      {"attempts", attempts},
      {"offline", offline},
      {"overhead_us", overhead_us},
      {"model", or_null(model)},
      {"upstream", or_null(upstream)},
      {"cost", cost ? json(*cost) : json(nullptr)},
  };
  if (!key.empty()) out["key"] = key;
  if (committed_after_pieces) out["committed_after_pieces"] = *committed_after_pieces;
  if (cache_similarity) out["cache_similarity"] = *cache_similarity;
  if (!cache_entry.empty()) out["cache_entry"] = cache_entry;
  if (decision.edge_engine != EdgeEngine::none) out["edge_engine"] = to_string(decision.edge_engine);
  if (!edge_model.empty()) out["edge_model"] = edge_model;
  if (decision.intent_confidence) out["intent_confidence"] = *decision.intent_confidence;
  if (decision.in_scope) out["in_scope"] = *decision.in_scope;
  if (with_figures) {
    // The path in detail (every level and attempt, with member names) is the operator's view,
    // like the figures: always in the request log, in responses only with expose_figures.
    json hop_list = json::array();
    for (const auto& hop : hops) hop_list.push_back(hengshi::to_json(hop));
    out["plan"] = hengshi::to_json(decision.plan);
    out["hops"] = std::move(hop_list);
    if (!decision.figures.empty()) out["figures"] = decision.figures;
  }
  return out;
}

namespace {

// A name the gateway defines (an enum's): plain ASCII by construction, so it is written without
// the escaping scan, which cost about 150 instructions a name.
void write_name_or_null(std::string& out, std::string_view name) {
  if (name.empty()) {
    out += "null";
    return;
  }
  out += '"';
  out.append(name);
  out += '"';
}

void write_string_or_null(std::string& out, std::string_view value) {
  if (value.empty()) {
    out += "null";
  } else {
    append_json_string(out, value);
  }
}

void write_number_or_null(std::string& out, std::optional<double> value) {
  if (value) {
    append_json_number(out, *value);
  } else {
    out += "null";
  }
}

}  // namespace

// Members in the order nlohmann's sorted object writes them, so both paths give the same text.
std::string ResponseMeta::to_json_text(bool with_figures) const {
  if (with_figures) return dump_text(to_json(true));
  std::string out;
  out.reserve(384);
  // Each member's name is written with its separators, one literal and one append each.
  out += "{\"answer_kind\":";
  write_name_or_null(out, answer_kind ? to_string(*answer_kind) : std::string_view());
  out += ",\"answered_by\":";
  write_string_or_null(out, answered_by);
  out += ",\"attempts\":";
  append_dom_integer(out, std::int64_t{attempts});
  out += ",\"cache\":";
  append_json_string(out, cache);
  if (!cache_entry.empty()) {
    out += ",\"cache_entry\":";
    append_json_string(out, cache_entry);
  }
  if (cache_similarity) {
    out += ",\"cache_similarity\":";
    append_json_number(out, *cache_similarity);
  }
  if (committed_after_pieces) {
    out += ",\"committed_after_pieces\":";
    append_dom_integer(out, std::int64_t{*committed_after_pieces});
  }
  out += ",\"confidence\":";
  write_number_or_null(out, decision.confidence);
  out += ",\"cost\":";
  write_number_or_null(out, cost);
  if (decision.edge_engine != EdgeEngine::none) {
    out += ",\"edge_engine\":";
    write_name_or_null(out, to_string(decision.edge_engine));
  }
  if (!edge_model.empty()) {
    out += ",\"edge_model\":";
    append_json_string(out, edge_model);
  }
  out += ",\"fallback_type\":";
  write_name_or_null(out, to_string(decision.fallback_type));
  if (decision.in_scope) {
    out += ",\"in_scope\":";
    append_json_number(out, *decision.in_scope);
  }
  out += ",\"intent\":";
  write_string_or_null(out, decision.intent);
  if (decision.intent_confidence) {
    out += ",\"intent_confidence\":";
    append_json_number(out, *decision.intent_confidence);
  }
  if (!key.empty()) {
    out += ",\"key\":";
    append_json_string(out, key);
  }
  out += ",\"level\":";
  append_dom_integer(out, std::int64_t{level});
  out += ",\"model\":";
  write_string_or_null(out, model);
  out += ",\"offline\":";
  out += offline ? "true" : "false";
  out += ",\"overhead_us\":";
  append_dom_integer(out, std::int64_t{overhead_us});
  out += ",\"reason\":";
  write_name_or_null(out, to_string(decision.reason));
  out += ",\"request_id\":";
  append_json_string(out, request_id);
  out += ",\"route\":";
  write_name_or_null(out, to_string(decision.route));
  out += ",\"upstream\":";
  write_string_or_null(out, upstream);
  out += '}';
  return out;
}

}  // namespace hengshi
