#include "router/router_policy.h"

#include <fstream>
#include <sstream>

#include <xxhash.h>

#include "core/yaml_fields.h"

namespace hengshi::router {
namespace {

using yaml_fields::FieldError;
using yaml_fields::positive;
using yaml_fields::read;
using yaml_fields::reject_unknown;

constexpr const char* kDefaultSafeMessage =
    "为保护您的个人信息，此问题无法在线处理，请通过官方客服渠道联系我们。"
    "To protect your personal information this request cannot be handled here; please contact "
    "us through an official support channel.";
constexpr const char* kDefaultHumanMessage =
    "正在为您转接人工客服，请稍候。Connecting you to a human agent, please hold on.";

// Reads a band's route: cloud-small, cloud-large or human, plus `extra` where that band allows it.
void read_route(const YAML::Node& node, const std::string& path, const std::string& key, std::string& out,
                const std::string& extra = "") {
  read(node, path, key, out);
  if (!node[key] || out == "cloud-small" || out == "cloud-large" || out == "human") return;
  if (!extra.empty() && out == extra) return;
  const std::string allowed = extra.empty() ? "cloud-small, cloud-large or human"
                                            : "cloud-small, cloud-large, human or " + extra;
  throw FieldError{path + "." + key, "must be " + allowed + " (got '" + out + "')"};
}

std::vector<std::string> string_list(const YAML::Node& node, const std::string& field) {
  std::vector<std::string> out;
  if (!node) return out;
  if (!node.IsSequence()) throw FieldError{field, "must be a list of strings"};
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar()) throw FieldError{field + "[" + std::to_string(i) + "]", "must be a string"};
    out.push_back(node[i].as<std::string>());
  }
  return out;
}

Band read_band(const YAML::Node& node, const std::string& path, Band band) {
  reject_unknown(node, path, {"high", "low"});
  read(node, path, "high", band.high);
  read(node, path, "low", band.low);
  if (!(band.low >= 0 && band.low <= band.high && band.high <= kEdgeNever)) {
    throw FieldError{path, "needs 0 <= low <= high <= 1.01"};
  }
  return band;
}

// Walks the YAML document into the pieces that need validation by their own create().
struct Parsed {
  PiiConfig pii;
  std::vector<SensitiveRule> sensitive = SensitiveSignals::defaults();
  std::map<std::string, CapabilityRow> capabilities = CapabilityMatrix::defaults();
  Band default_band;
};

void apply(const YAML::Node& root, Parsed& parsed, RouterPolicy& policy) {
  if (!root || root.IsNull()) return;
  reject_unknown(root, "", {"pii", "sensitive", "human_message", "capabilities", "confidence",
                            "complexity", "latency", "sessions"});
  if (const YAML::Node pii = root["pii"]) {
    reject_unknown(pii, "pii", {"enabled", "patterns", "safe_message", "non_text_parts"});
    read(pii, "pii", "enabled", parsed.pii.enabled);
    read(pii, "pii", "safe_message", policy.pii_safe_message);
    if (pii["non_text_parts"]) {
      std::string non_text = "pin";
      read(pii, "pii", "non_text_parts", non_text);
      if (non_text == "pin") {
        policy.pii_non_text_parts = NonTextParts::kPin;
      } else if (non_text == "refuse") {
        policy.pii_non_text_parts = NonTextParts::kRefuse;
      } else {
        throw FieldError{"pii.non_text_parts", "must be pin or refuse (got '" + non_text + "')"};
      }
    }
    if (const YAML::Node patterns = pii["patterns"]) {
      if (!patterns.IsSequence()) throw FieldError{"pii.patterns", "must be a list of {name, regex}"};
      for (std::size_t i = 0; i < patterns.size(); ++i) {
        std::string path = "pii.patterns[" + std::to_string(i) + "]";
        reject_unknown(patterns[i], path, {"name", "regex"});
        PiiPattern pattern;
        read(patterns[i], path, "name", pattern.name);
        read(patterns[i], path, "regex", pattern.regex);
        parsed.pii.patterns.push_back(std::move(pattern));
      }
    }
  }
  if (const YAML::Node sensitive = root["sensitive"]) {
    if (!sensitive.IsSequence()) throw FieldError{"sensitive", "must be a list of rules"};
    parsed.sensitive.clear();  // a file that lists rules replaces the built-in ones
    for (std::size_t i = 0; i < sensitive.size(); ++i) {
      std::string path = "sensitive[" + std::to_string(i) + "]";
      reject_unknown(sensitive[i], path, {"name", "keywords", "patterns", "target"});
      SensitiveRule rule;
      read(sensitive[i], path, "name", rule.name);
      read(sensitive[i], path, "target", rule.target);
      rule.keywords = string_list(sensitive[i]["keywords"], path + ".keywords");
      rule.patterns = string_list(sensitive[i]["patterns"], path + ".patterns");
      parsed.sensitive.push_back(std::move(rule));
    }
  }
  read(root, "", "human_message", policy.human_message);
  if (const YAML::Node capabilities = root["capabilities"]) {
    if (!capabilities.IsMap()) throw FieldError{"capabilities", "must be a mapping task_type → row"};
    for (const auto& item : capabilities) {
      auto task = item.first.as<std::string>();
      std::string path = "capabilities." + task;
      reject_unknown(item.second, path, {"edge", "max_input_tokens", "max_output_tokens", "condition"});
      CapabilityRow row = parsed.capabilities.count(task) ? parsed.capabilities[task] : CapabilityRow{};
      std::string edge = std::string(to_string(row.edge));
      read(item.second, path, "edge", edge);
      auto allowance = parse_allowance(edge);
      if (!allowance) throw FieldError{path + ".edge", "must be yes, no or partial (got '" + edge + "')"};
      row.edge = *allowance;
      read(item.second, path, "max_input_tokens", row.max_input_tokens);
      read(item.second, path, "max_output_tokens", row.max_output_tokens);
      read(item.second, path, "condition", row.condition);
      parsed.capabilities[task] = row;
    }
  }
  if (const YAML::Node confidence = root["confidence"]) {
    reject_unknown(confidence, "confidence",
                   {"default_band", "middle_band_route", "low_band_route", "out_of_scope_route"});
    if (confidence["default_band"]) {
      parsed.default_band = read_band(confidence["default_band"], "confidence.default_band", parsed.default_band);
    }
    read_route(confidence, "confidence", "middle_band_route", policy.confidence.middle_band_route,
               "edge_verify");
    read_route(confidence, "confidence", "low_band_route", policy.confidence.low_band_route);
    read_route(confidence, "confidence", "out_of_scope_route", policy.confidence.out_of_scope_route);
  }
  if (const YAML::Node complexity = root["complexity"]) {
    reject_unknown(complexity, "complexity", {"cloud_large_at"});
    read(complexity, "complexity", "cloud_large_at", policy.complexity_cloud_large_at);
    if (policy.complexity_cloud_large_at < 1 || policy.complexity_cloud_large_at > 6) {
      throw FieldError{"complexity.cloud_large_at", "must be within 1..6 (6 = never)"};
    }
  }
  if (const YAML::Node latency = root["latency"]) {
    reject_unknown(latency, "latency", {"edge_intent_ms", "edge_llm_ttft_ms", "edge_llm_tokens_per_s",
                                        "expected_output_tokens", "cloud_p90_prior_ms"});
    LatencyPolicy& l = policy.latency;
    read(latency, "latency", "edge_intent_ms", l.edge_intent_ms);
    read(latency, "latency", "edge_llm_ttft_ms", l.edge_llm_ttft_ms);
    read(latency, "latency", "edge_llm_tokens_per_s", l.edge_llm_tokens_per_s);
    read(latency, "latency", "expected_output_tokens", l.expected_output_tokens);
    if (!(l.edge_intent_ms >= 0)) throw FieldError{"latency.edge_intent_ms", "must be >= 0"};
    if (!(l.edge_llm_ttft_ms >= 0)) throw FieldError{"latency.edge_llm_ttft_ms", "must be >= 0"};
    if (!(l.edge_llm_tokens_per_s > 0)) throw FieldError{"latency.edge_llm_tokens_per_s", "must be > 0"};
    positive(l.expected_output_tokens, "latency.expected_output_tokens");
    if (const YAML::Node priors = latency["cloud_p90_prior_ms"]) {
      reject_unknown(priors, "latency.cloud_p90_prior_ms", {"cloud-small", "cloud-large"});
      for (auto& [pool, value] : l.cloud_p90_prior_ms) {
        read(priors, "latency.cloud_p90_prior_ms", pool, value);
        if (!(value > 0)) throw FieldError{"latency.cloud_p90_prior_ms." + pool, "must be > 0"};
      }
    }
  }
  if (const YAML::Node sessions = root["sessions"]) {
    reject_unknown(sessions, "sessions", {"enabled", "window", "ttl_s", "max_sessions"});
    read(sessions, "sessions", "enabled", policy.sessions.enabled);
    read(sessions, "sessions", "window", policy.sessions.window);
    read(sessions, "sessions", "ttl_s", policy.sessions.ttl_s);
    read(sessions, "sessions", "max_sessions", policy.sessions.max_sessions);
    positive(policy.sessions.window, "sessions.window");
    positive(policy.sessions.ttl_s, "sessions.ttl_s");
    positive(policy.sessions.max_sessions, "sessions.max_sessions");
  }
}

std::string hex64(std::uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(value));
  return buffer;
}

// Prefixes a stage's own error (which names the field) with the file.
Error in_file(const std::string& source, const Error& error) {
  return Error{"config_invalid", source + ": " + error.message};
}

}  // namespace

Result<std::shared_ptr<const RouterPolicy>> parse_router_policy(
    const std::string& yaml_text, const std::string& policy_source,
    const std::string& thresholds_file, const std::string& complexity_model_dir) {
  auto policy = std::make_shared<RouterPolicy>(
      RouterPolicy{policy_source,
                   "",
                   *PiiDetector::create({}),
                   kDefaultSafeMessage,
                   *SensitiveSignals::create(SensitiveSignals::defaults()),
                   kDefaultHumanMessage,
                   *CapabilityMatrix::create(CapabilityMatrix::defaults()),
                   Thresholds(),
                   {},
                   {},
                   4,
                   {},
                   NonTextParts::kPin});
  Parsed parsed;
  try {
    apply(YAML::Load(yaml_text), parsed, *policy);
  } catch (const FieldError& e) {
    return Error{"config_invalid", policy_source + ": " + e.field + ": " + e.reason};
  } catch (const YAML::Exception& e) {
    return Error{"config_invalid",
                 policy_source + ": line " + std::to_string(e.mark.line + 1) + ": " + e.msg};
  }
  auto pii = PiiDetector::create(parsed.pii);
  if (!pii) return Error{"config_invalid", policy_source + ": pii." + pii.error().message};
  policy->pii = std::move(*pii);
  auto sensitive = SensitiveSignals::create(parsed.sensitive);
  if (!sensitive) return in_file(policy_source, sensitive.error());
  policy->sensitive = std::move(*sensitive);
  auto capabilities = CapabilityMatrix::create(parsed.capabilities);
  if (!capabilities) return in_file(policy_source, capabilities.error());
  policy->capabilities = std::move(*capabilities);

  std::string thresholds_version = "none";
  if (!thresholds_file.empty()) {
    auto file = load_thresholds_file(thresholds_file);
    if (!file) return file.error();
    thresholds_version = file->version;
    auto thresholds = Thresholds::create(std::move(*file), thresholds_file);
    if (!thresholds) return thresholds.error();
    policy->thresholds = std::move(*thresholds);
  } else {
    ThresholdsFile file;
    file.version = "policy-default";
    file.default_band = parsed.default_band;
    auto thresholds = Thresholds::create(std::move(file), policy_source);
    if (!thresholds) return thresholds.error();
    policy->thresholds = std::move(*thresholds);
  }
  policy->version = "pol-" + hex64(XXH64(yaml_text.data(), yaml_text.size(), 0)).substr(0, 8) + "+" +
                    thresholds_version;
  if (!complexity_model_dir.empty()) {
    auto model = ComplexityModel::load(complexity_model_dir);
    if (!model) {
      return Error{"config_invalid", "routing.complexity_model: " + model.error().message};
    }
    policy->complexity_model = std::move(*model);
    policy->version += "+cx-" + policy->complexity_model->version();
  }
  return std::shared_ptr<const RouterPolicy>(std::move(policy));
}

std::string pii_disabled_warning(const RouterPolicy& policy) {
  if (policy.pii.enabled()) return "";
  return "PII detection is disabled by the router policy (" + policy.source + ", pii.enabled: " +
         "false): requests with personal data or images may be sent to cloud pools";
}

Result<std::shared_ptr<const RouterPolicy>> load_router_policy(
    const std::string& policy_file, const std::string& thresholds_file,
    const std::string& complexity_model_dir) {
  if (policy_file.empty()) {
    return parse_router_policy("", "<embedded policy>", thresholds_file, complexity_model_dir);
  }
  std::ifstream in(policy_file);
  if (!in) return Error{"config_unreadable", policy_file + ": cannot open router policy file"};
  std::stringstream text;
  text << in.rdbuf();
  return parse_router_policy(text.str(), policy_file, thresholds_file, complexity_model_dir);
}

}  // namespace hengshi::router
