// What one attempt at a level produces: an Answer, or an AttemptError whose class tells the
// chain what to do next (retry the level, fall through to the next one, or stop). Sources build
// these; the chain (chain.h) reads them; nothing here touches a socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "cloud/reply_body.h"
#include "cloud/upstream_error.h"
#include "core/api_error.h"
#include "core/asio.h"
#include "core/deadline.h"

namespace hengshi::chain {

struct TokenCounts {
  std::int64_t prompt = 0;
  std::int64_t completion = 0;
};

// A complete answer. For a stream, `content` is empty when the pieces already went out.
struct Answer {
  std::string content;
  std::string finish_reason = "stop";
  TokenCounts usage;
  cloud::ReplyBody upstream_body;  // a cloud JSON reply, passed through with our metadata added
  bool pieces_carry_finish = false;  // a cloud stream: the upstream's own chunks had role/finish
  std::string model;
  std::string edge_model;            // the edge LLM's base and adapter versions (ResponseMeta)
  std::string upstream;              // pool member; "" for the edge and canned replies
  std::string pool;                  // "cloud-small" / "cloud-large"; "edge"; "" canned
  double cost = 0.0;                 // billed: this attempt (incl. a verification call)
  std::chrono::microseconds source_time{0};  // time inside the source (not gateway overhead)
  std::chrono::microseconds ttft{0};
  // When the source's answer was complete, if it read the clock then (a cloud reply's end): the
  // chain's own end of the attempt shares that reading. Unset: the chain reads the clock.
  Clock::time_point finished_at{};
  // Numbers worth logging (token probs, verify). Null until a source sets one (`figures["x"] = …`
  // makes it an object): most answers have none, and an empty object is a map allocated per answer.
  nlohmann::json figures;
};

// What the chain does with a failed attempt.
enum class ErrorClass {
  retryable,   // the same level may try again (another member), budget permitting
  next_level,  // this level cannot answer; the next one may
  terminal,    // stop here: the request itself is wrong, or load is being shed
  cancelled,   // the client went away
};

struct AttemptError {
  ErrorClass error_class = ErrorClass::next_level;
  std::string kind;      // stable code for hops/logs/metrics: server_error, ttft_timeout, rejected, ...
  ApiError api;          // what the client sees if this is the final error
  std::string upstream;  // member that failed, if any
  std::optional<std::int64_t> retry_after_ms;
  bool after_first_byte = false;  // pieces already reached the client
  bool cloud_unreachable = false;  // connect failure / timeout: feeds offline mode
  bool member_open = false;        // the call reached an open member (pool in panic): not retried
  std::optional<cloud::UpstreamErrorKind> upstream_kind;  // for a cloud attempt
  double cost = 0.0;               // billed even though it failed (a rejected verification)
};

// Classifies an upstream failure once, for retries, fallbacks and offline mode.
AttemptError from_upstream(const cloud::UpstreamError& error);

// One piece of a stream: an upstream chat.completion.chunk (JSON text, passed through) or a
// piece of answer text (the writer wraps it in a chunk).
struct Piece {
  enum class Kind { upstream_chunk, text };
  Kind kind = Kind::text;
  std::string_view data;
  bool more = false;  // another piece follows at once (no network wait): may be written with it
};
using PieceSink = std::function<awaitable<bool>(const Piece& piece)>;

}  // namespace hengshi::chain
