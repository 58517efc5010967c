// ChatRequest: a validated OpenAI chat-completions request plus hengshi's extension object.
// parse_chat_request() is the only way in: it rejects what the gateway cannot serve with an
// OpenAI-style 400 naming the offending field, and keeps the caller's body for pass-through so
// no field the caller sent is silently dropped on the way to a cloud upstream.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/api_error.h"
#include "core/chain_config.h"
#include "core/result.h"

namespace simdjson::dom {
class document;
class element;
}  // namespace simdjson::dom

namespace hengshi {

struct ChatMessage {
  std::string role;  // system | user | assistant | tool | developer | function
  std::string text;  // text content flattened (string content, or the text parts of an array)
};

// The optional "hengshi" request object (DESIGN.md §4); headers X-Hengshi-* fill the same fields.
struct HengshiExtension {
  std::string task_type;
  std::string session_id;
  std::optional<std::int64_t> deadline_ms;  // budget for the whole request, from arrival
  std::vector<std::string> tags;
  std::string pii_policy;
  std::optional<CommitMode> commit;  // a stream's hold-back (chain.commit.mode) for this request
  std::optional<bool> cache;         // false: neither served from nor stored in the cache
};

// Bounds on what a caller may send (400 above them, naming the limit).
inline constexpr std::size_t kMaxSessionIdBytes = 128;  // sessions are kept in memory per id
inline constexpr std::size_t kMaxTaskTypeBytes = 128;   // task types key policy and metrics
inline constexpr std::int64_t kMaxDeadlineMs = 3'600'000;  // 1 h; larger values overflow clocks

// The members an upstream body writes itself (cloud/upstream_body) or never forwards.
inline constexpr std::array<std::string_view, 4> kMembersWrittenAgain = {"model", "stream", "stream_options",
                                                                          "hengshi"};

struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  bool stream = false;
  bool include_usage = false;               // stream_options.include_usage
  std::optional<std::int64_t> max_tokens;   // max_tokens or max_completion_tokens
  std::vector<std::string> stop;
  std::optional<double> temperature;        // 0..2 when set
  std::optional<double> top_p;              // 0..1 when set
  std::optional<std::int64_t> seed;
  std::string response_format;              // response_format.type, "" when not set
  HengshiExtension hengshi;
  // The body's members other than kMembersWrittenAgain, as the caller wrote them (json_raw_members),
  // when the parse vouched that they hold what `body` holds (TextBeyondDom): no object repeats a
  // member name (the DOM keeps the last value, an upstream's reader may take the first) and no
  // number below the top level has a fraction or exponent (the DOM keeps a double's digits, the
  // text may carry more). Otherwise the router's checks, which read the body as the DOM holds it
  // (core/json_members.h), would not have seen what went on. Upstream bodies splice these bytes
  // instead of writing `body()`. Set only by parse_chat_request; set_body() resets it.
  std::optional<std::string> forwarded_members;

  // The last user message, the text routing and the edge look at.
  std::string last_user_text() const;

  // The caller's body, forwarded upstream as it came (without "hengshi"), read two ways:
  // - body_root(): simdjson's parse of it, which the request keeps (a tape and a string buffer).
  //   The validation and the router's PII walk read it; its root object may hold "hengshi".
  //   False when the request has no body (built by hand without set_body).
  // - body(): a nlohmann DOM without "hengshi", built from that parse on the first call. A
  //   shadow call, an upstream body that cannot splice forwarded_members and a stream merging
  //   the caller's stream_options read it; a proxied request never builds it, nor do the
  //   cache's keys (they hash the parse).
  bool body_root(simdjson::dom::element& root) const;
  const nlohmann::json& body() const;
  // For a request built in the gateway or a test: `body` becomes both forms (its text is
  // parsed again); forwarded_members is reset.
  void set_body(nlohmann::json body);
  // The body holds a "stream_options" object (its last, as the DOM holds it), read from the parse.
  bool sent_stream_options() const;

  // Set by parse_chat_request and set_body; shared by copies (neither changes after).
  std::shared_ptr<const simdjson::dom::document> parsed_body;
  mutable std::shared_ptr<const nlohmann::json> body_dom;  // body()'s, once built
};

// Rejects invalid JSON, nesting deeper than kMaxJsonDepth (core/json_text.h), and every field
// the gateway reads with the wrong type or out of range.
Result<ChatRequest, ApiError> parse_chat_request(std::string_view body);

// Checks a deadline (body or X-Hengshi-Deadline-Ms): 1..kMaxDeadlineMs.
Result<std::int64_t, ApiError> check_deadline_ms(std::int64_t value, const std::string& param);

}  // namespace hengshi
