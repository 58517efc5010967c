// Profile: how the simulated upstream behaves — latency, pacing, output length and the rates of
// injected faults — with optional per-model overrides. Every field has a default; the defaults
// describe a fast, healthy upstream. A profile is parsed from YAML (a file) or JSON (a file or
// POST /admin/profile) and fully validated before use: a bad profile is rejected whole with an
// error naming the source, the field and the reason, and never half-applies.
// A Profile is a plain value; the server shares it as std::shared_ptr<const Profile>.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "sim/latency_model.h"

namespace hengshi::sim {

struct TokenRange {
  std::int64_t min = 8;  // completion length in tokens (1 token ~ 1 word), both inclusive
  std::int64_t max = 32;

  bool operator==(const TokenRange&) const = default;
};

// One model's behaviour. The rates are probabilities of disjoint outcomes of one request, so
// their sum must be <= 1; the rest of the mass is a normal answer.
struct Behaviour {
  LatencyPercentiles latency_ms;  // non-stream: request arrival to the whole response
  LatencyPercentiles ttft_ms;     // stream: request arrival to the first content token
  double tokens_per_s = 0;        // stream pacing after the first token; 0 = no pacing
  TokenRange output_tokens;
  double error_rate = 0;       // 500 with an OpenAI error body
  double rate_limit_rate = 0;  // 429 with Retry-After: retry_after_s
  std::int64_t retry_after_s = 1;
  double hang_rate = 0;        // never answer, until the client closes or the idle timeout
  double disconnect_rate = 0;  // drop the connection mid-response
  std::int64_t disconnect_after_chunks = 2;  // stream: SSE events sent before the drop
  double garbage_rate = 0;                   // 200 with a non-JSON body / a garbage SSE event

  bool operator==(const Behaviour&) const = default;
};

struct Profile {
  std::string source = "<defaults>";  // where the profile came from, for messages
  Behaviour defaults;
  // Per-model behaviour, already resolved: the top-level fields with the model's overrides on top.
  std::map<std::string, Behaviour, std::less<>> models;

  // The behaviour for a requested model: its override, or the defaults.
  const Behaviour& for_model(std::string_view model) const;

  // The profile as JSON, in the form parse_profile_json() accepts (a round trip is exact).
  nlohmann::json to_json() const;

  bool operator==(const Profile& other) const {
    return defaults == other.defaults && models == other.models;
  }
};

// Parses and validates a profile from JSON; `source` names the origin in error messages.
Result<Profile> parse_profile_json(const nlohmann::json& doc, const std::string& source);
// Parses JSON text (e.g. the body of POST /admin/profile).
Result<Profile> parse_profile_json_text(std::string_view text, const std::string& source);
// Parses YAML text (JSON is accepted too, as YAML flow style).
Result<Profile> parse_profile_yaml_text(const std::string& text, const std::string& source);
// Reads a file: *.json as JSON, anything else as YAML.
Result<Profile> load_profile_file(const std::string& path);

}  // namespace hengshi::sim
