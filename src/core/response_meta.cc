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
  auto member = [&out](std::string_view name) {
    out += out.size() == 1 ? "\"" : ",\"";
    out += name;
    out += "\":";
  };
  out += '{';
  member("answer_kind");
  write_string_or_null(out, answer_kind ? to_string(*answer_kind) : std::string_view());
  member("answered_by");
  write_string_or_null(out, answered_by);
  member("attempts");
  out += std::to_string(attempts);
  member("cache");
  append_json_string(out, cache);
  if (!cache_entry.empty()) {
    member("cache_entry");
    append_json_string(out, cache_entry);
  }
  if (cache_similarity) {
    member("cache_similarity");
    append_json_number(out, *cache_similarity);
  }
  if (committed_after_pieces) {
    member("committed_after_pieces");
    out += std::to_string(*committed_after_pieces);
  }
  member("confidence");
  write_number_or_null(out, decision.confidence);
  member("cost");
  write_number_or_null(out, cost);
  if (decision.edge_engine != EdgeEngine::none) {
    member("edge_engine");
    append_json_string(out, to_string(decision.edge_engine));
  }
  if (!edge_model.empty()) {
    member("edge_model");
    append_json_string(out, edge_model);
  }
  member("fallback_type");
  write_string_or_null(out, to_string(decision.fallback_type));
  if (decision.in_scope) {
    member("in_scope");
    append_json_number(out, *decision.in_scope);
  }
  member("intent");
  write_string_or_null(out, decision.intent);
  if (decision.intent_confidence) {
    member("intent_confidence");
    append_json_number(out, *decision.intent_confidence);
  }
  if (!key.empty()) {
    member("key");
    append_json_string(out, key);
  }
  member("level");
  out += std::to_string(level);
  member("model");
  write_string_or_null(out, model);
  member("offline");
  out += offline ? "true" : "false";
  member("overhead_us");
  out += std::to_string(overhead_us);
  member("reason");
  append_json_string(out, to_string(decision.reason));
  member("request_id");
  append_json_string(out, request_id);
  member("route");
  append_json_string(out, to_string(decision.route));
  member("upstream");
  write_string_or_null(out, upstream);
  out += '}';
  return out;
}

}  // namespace hengshi
