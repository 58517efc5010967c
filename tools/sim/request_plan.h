// RequestPlan: what the simulator will do with one chat request — its outcome (answer or an
// injected fault), when it answers and how long the answer is — decided before any I/O.
// plan_request() is a pure function of (behaviour, seed, request index, stream, markers), which
// is what makes `--seed N` runs reproducible and lets tests check behaviour without sockets.
//
// Markers let a test force a behaviour for one request from the last user message:
//   [[sim:hang]] [[sim:error]] [[sim:429]] [[sim:garbage]] [[sim:disconnect]] [[sim:slow=MS]]
// An outcome marker replaces the drawn outcome (the last one wins); slow=MS replaces the drawn
// delay (latency for non-stream, time to first token for stream) and applies to every outcome.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sim/profile.h"

namespace hengshi::sim {

enum class Outcome { kOk, kError, kRateLimit, kHang, kDisconnect, kGarbage };

// Stable lowercase name ("ok", "error", "rate_limit", "hang", "disconnect", "garbage").
const char* outcome_name(Outcome outcome);

struct Markers {
  std::optional<Outcome> forced_outcome;
  std::optional<std::int64_t> slow_ms;
  std::optional<std::string> reply;  // [[sim:reply=TEXT]]: answer exactly TEXT (a verdict, say)
};

// Finds the markers in a message; unknown [[sim:...]] markers are ignored.
Markers parse_markers(std::string_view text);

struct RequestPlan {
  Outcome outcome = Outcome::kOk;
  // Wait before the response (non-stream) or before the first content token (stream), in ms.
  // Errors and 429s answer at once unless slow=MS forces a delay.
  std::int64_t delay_ms = 0;
  std::int64_t token_interval_us = 0;  // stream: gap between content tokens; 0 = no pacing
  std::int64_t output_tokens = 1;      // completion length (words), before max_tokens
  std::int64_t disconnect_after_chunks = 0;
  std::int64_t retry_after_s = 0;
  std::optional<std::string> reply;  // fixed answer text instead of the generated words

  bool operator==(const RequestPlan&) const = default;
};

RequestPlan plan_request(const Behaviour& behaviour, std::uint64_t seed,
                         std::uint64_t request_index, bool stream, const Markers& markers);

}  // namespace hengshi::sim
