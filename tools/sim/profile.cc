#include "sim/profile.h"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include <yaml-cpp/yaml.h>

namespace hengshi::sim {
namespace {

using nlohmann::json;

constexpr std::int64_t kMaxOutputTokens = 1'000'000;
constexpr std::int64_t kMaxRetryAfterS = 86'400;
constexpr std::int64_t kMaxDisconnectAfterChunks = 1'000'000;

Error invalid(const std::string& source, const std::string& field, const std::string& why) {
  return Error{"profile_invalid", source + ": " + field + ": " + why};
}

// Reads the fields of one behaviour object onto `out`; every key must be known.
class BehaviourReader {
 public:
  BehaviourReader(const std::string& source, std::string prefix)
      : source_(source), prefix_(std::move(prefix)) {}

  Status read(const json& object, Behaviour& out, bool allow_models) const {
    if (!object.is_object()) return invalid(source_, where(""), "must be an object");
    for (const auto& [key, value] : object.items()) {
      Status status = read_field(key, value, out, allow_models);
      if (!status) return status;
    }
    return check(out);
  }

 private:
  std::string where(const std::string& key) const {
    if (prefix_.empty()) return key.empty() ? "<top level>" : key;
    return key.empty() ? prefix_ : prefix_ + "." + key;
  }

  Status read_field(const std::string& key, const json& value, Behaviour& out,
                    bool allow_models) const {
    if (key == "latency_ms") return read_percentiles(key, value, out.latency_ms);
    if (key == "ttft_ms") return read_percentiles(key, value, out.ttft_ms);
    if (key == "tokens_per_s") return read_number(key, value, 0, 1e9, out.tokens_per_s);
    if (key == "output_tokens") return read_token_range(key, value, out.output_tokens);
    if (key == "error_rate") return read_rate(key, value, out.error_rate);
    if (key == "rate_limit_rate") return read_rate(key, value, out.rate_limit_rate);
    if (key == "retry_after_s") {
      return read_integer(key, value, 0, kMaxRetryAfterS, out.retry_after_s);
    }
    if (key == "hang_rate") return read_rate(key, value, out.hang_rate);
    if (key == "disconnect_rate") return read_rate(key, value, out.disconnect_rate);
    if (key == "disconnect_after_chunks") {
      return read_integer(key, value, 0, kMaxDisconnectAfterChunks, out.disconnect_after_chunks);
    }
    if (key == "garbage_rate") return read_rate(key, value, out.garbage_rate);
    if (key == "models" && allow_models) return Ok{};  // read by the caller, after the defaults
    return invalid(source_, where(key),
                   allow_models || key != "models" ? "unknown field"
                                                   : "models may only appear at the top level");
  }

  Status read_number(const std::string& key, const json& value, double lo, double hi,
                     double& out) const {
    if (!value.is_number()) return invalid(source_, where(key), "must be a number");
    double number = value.get<double>();
    if (!std::isfinite(number) || number < lo || number > hi) {
      std::ostringstream why;
      why << "must be between " << lo << " and " << hi << " (got " << value.dump() << ")";
      return invalid(source_, where(key), why.str());
    }
    out = number;
    return Ok{};
  }

  Status read_rate(const std::string& key, const json& value, double& out) const {
    return read_number(key, value, 0.0, 1.0, out);
  }

  Status read_integer(const std::string& key, const json& value, std::int64_t lo, std::int64_t hi,
                      std::int64_t& out) const {
    bool integral = value.is_number_integer() ||
                    (value.is_number_float() && std::isfinite(value.get<double>()) &&
                     std::floor(value.get<double>()) == value.get<double>());
    if (!integral) return invalid(source_, where(key), "must be an integer");
    double number = value.get<double>();
    if (number < static_cast<double>(lo) || number > static_cast<double>(hi)) {
      return invalid(source_, where(key),
                     "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                         " (got " + value.dump() + ")");
    }
    out = static_cast<std::int64_t>(number);
    return Ok{};
  }

  Status read_percentiles(const std::string& key, const json& value,
                          LatencyPercentiles& out) const {
    if (!value.is_object()) return invalid(source_, where(key), "must be an object {p50, p95}");
    LatencyPercentiles read = out;
    bool has_p95 = value.contains("p95");
    for (const auto& [name, number] : value.items()) {
      double* target = name == "p50" ? &read.p50_ms : name == "p95" ? &read.p95_ms : nullptr;
      if (target == nullptr) return invalid(source_, where(key + "." + name), "unknown field");
      Status status =
          read_number(key + "." + name, number, 0, LatencyModel::kMaxLatencyMs, *target);
      if (!status) return status;
    }
    // {p50: X} alone means a fixed latency: p95 follows p50 rather than keeping an old spread.
    if (!has_p95) read.p95_ms = read.p50_ms;
    std::string why = LatencyModel::validate(read);
    if (!why.empty()) return invalid(source_, where(key), why);
    out = read;
    return Ok{};
  }

  Status read_token_range(const std::string& key, const json& value, TokenRange& out) const {
    if (!value.is_object()) return invalid(source_, where(key), "must be an object {min, max}");
    TokenRange read = out;
    for (const auto& [name, number] : value.items()) {
      std::int64_t* target = name == "min" ? &read.min : name == "max" ? &read.max : nullptr;
      if (target == nullptr) return invalid(source_, where(key + "." + name), "unknown field");
      Status status = read_integer(key + "." + name, number, 1, kMaxOutputTokens, *target);
      if (!status) return status;
    }
    if (read.max < read.min) {
      // Only min given and above the old max: widen max rather than fail.
      if (!value.contains("max")) {
        read.max = read.min;
      } else {
        return invalid(source_, where(key),
                       "min (" + std::to_string(read.min) + ") must be <= max (" +
                           std::to_string(read.max) + ")");
      }
    }
    out = read;
    return Ok{};
  }

  Status check(const Behaviour& behaviour) const {
    double total = behaviour.error_rate + behaviour.rate_limit_rate + behaviour.hang_rate +
                   behaviour.disconnect_rate + behaviour.garbage_rate;
    if (total > 1.0 + 1e-9) {
      std::ostringstream why;
      why << "error_rate + rate_limit_rate + hang_rate + disconnect_rate + garbage_rate must be "
             "<= 1 (got "
          << total << "): the rates are shares of one request's disjoint outcomes";
      return invalid(source_, where(""), why.str());
    }
    return Ok{};
  }

  const std::string& source_;
  std::string prefix_;
};

json percentiles_json(const LatencyPercentiles& p) {
  return {{"p50", p.p50_ms}, {"p95", p.p95_ms}};
}

json behaviour_json(const Behaviour& b) {
  return {
      {"latency_ms", percentiles_json(b.latency_ms)},
      {"ttft_ms", percentiles_json(b.ttft_ms)},
      {"tokens_per_s", b.tokens_per_s},
      {"output_tokens", {{"min", b.output_tokens.min}, {"max", b.output_tokens.max}}},
      {"error_rate", b.error_rate},
      {"rate_limit_rate", b.rate_limit_rate},
      {"retry_after_s", b.retry_after_s},
      {"hang_rate", b.hang_rate},
      {"disconnect_rate", b.disconnect_rate},
      {"disconnect_after_chunks", b.disconnect_after_chunks},
      {"garbage_rate", b.garbage_rate},
  };
}

// YAML plain scalars carry no type; read them the way YAML 1.2's core schema does.
json yaml_scalar(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() != "?") return text;  // quoted: always a string
  if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
    return nullptr;
  }
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  std::int64_t integer = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), integer);
  if (ec == std::errc() && end == text.data() + text.size()) return integer;
  char* double_end = nullptr;
  double number = std::strtod(text.c_str(), &double_end);
  if (double_end == text.c_str() + text.size() && std::isfinite(number)) return number;
  return text;
}

json yaml_to_json(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      return nullptr;
    case YAML::NodeType::Scalar:
      return yaml_scalar(node);
    case YAML::NodeType::Sequence: {
      json array = json::array();
      for (const auto& item : node) array.push_back(yaml_to_json(item));
      return array;
    }
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& item : node) {
        object[item.first.as<std::string>()] = yaml_to_json(item.second);
      }
      return object;
    }
  }
  return nullptr;
}

}  // namespace

const Behaviour& Profile::for_model(std::string_view model) const {
  auto it = models.find(model);
  return it == models.end() ? defaults : it->second;
}

json Profile::to_json() const {
  json doc = behaviour_json(defaults);
  json model_docs = json::object();
  for (const auto& [name, behaviour] : models) model_docs[name] = behaviour_json(behaviour);
  doc["models"] = std::move(model_docs);
  return doc;
}

Result<Profile> parse_profile_json(const json& doc, const std::string& source) {
  Profile profile;
  profile.source = source;
  if (doc.is_null()) return profile;  // an empty file: all defaults
  Status status = BehaviourReader(source, "").read(doc, profile.defaults, /*allow_models=*/true);
  if (!status) return status.error();
  if (doc.contains("models") && !doc["models"].is_null()) {
    const json& models = doc["models"];
    if (!models.is_object()) {
      return invalid(source, "models", "must be a map of model name to overrides");
    }
    for (const auto& [name, overrides] : models.items()) {
      if (name.empty()) return invalid(source, "models", "a model name must not be empty");
      Behaviour behaviour = profile.defaults;
      if (!overrides.is_null()) {
        status = BehaviourReader(source, "models." + name).read(overrides, behaviour, false);
        if (!status) return status.error();
      }
      profile.models.emplace(name, behaviour);
    }
  }
  return profile;
}

Result<Profile> parse_profile_json_text(std::string_view text, const std::string& source) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return Error{"profile_invalid", source + ": not valid JSON"};
  return parse_profile_json(doc, source);
}

Result<Profile> parse_profile_yaml_text(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = yaml_to_json(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return Error{"profile_invalid", source + ": not valid YAML: " + e.what()};
  }
  return parse_profile_json(doc, source);
}

Result<Profile> load_profile_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return Error{"profile_unreadable", path + ": cannot open the file"};
  std::ostringstream text;
  text << file.rdbuf();
  bool is_json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  return is_json ? parse_profile_json_text(text.str(), path)
                 : parse_profile_yaml_text(text.str(), path);
}

}  // namespace hengshi::sim
