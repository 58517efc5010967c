// ReplyBody: an upstream's non-streaming chat.completion reply, kept as the bytes it sent.
// One validating simdjson pass reads the few fields the gateway needs (usage, the first choice's
// text and finish reason); the bytes themselves go to the client with the gateway's metadata
// spliced in, never parsed into a DOM and serialised again (that round trip was the largest
// JSON cost per proxied request).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace hengshi::cloud {

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

struct ReplyBody {
  std::string raw;                // the upstream's bytes: one valid JSON object with "choices"
  std::string content;            // choices[0].message.content, when a string
  std::string finish_reason;      // choices[0].finish_reason, when a string
  bool plain_text = false;        // exactly one choice, string content, no tool or function call
  bool has_hengshi = false;       // the upstream wrote its own "hengshi" member
  Usage usage;

  bool present() const { return !raw.empty(); }
};

// Reads `raw`, taken over only on success. The error's message says why it is not a chat.completion reply: not
// JSON, invalid UTF-8, nested too deep, not an object, or no "choices" array.
Result<ReplyBody> read_reply_body(std::string&& raw);
// The same into `body` (a default one, left as it was on failure): the hot path builds the reply
// in place, not moved out of a Result.
std::optional<Error> read_reply_body(std::string&& raw, ReplyBody& body);

// The readable capacity simdjson needs past a text's end (simdjson::SIMDJSON_PADDING, checked
// where simdjson is included): a text reserved with it is parsed without being copied.
inline constexpr std::size_t kJsonPadding = 64;

// What a stream chunk says about usage, read by the parse that checks it.
struct ChunkUsage {
  bool has_usage = false;   // a top-level "usage" object, whose counts are in `usage`
  Usage usage;
  bool usage_only = false;  // no top-level "choices", or an empty array (or not an object)
};

// True when `text` is one valid JSON value (UTF-8 checked), by simdjson: how each streamed
// chunk is checked before it is passed on. With `usage`, also reads the chunk's usage from the
// same parse (a second parse of the chunk by nlohmann was 25k instructions). `text` must have
// simdjson's padding of readable capacity past its end; the function reserves it (a copy when
// it was not there).
bool is_valid_json(std::string& text, ChunkUsage* usage = nullptr);

// The reply's bytes with `"name": value_json` as the object's last member. `value_json` must be
// one serialised JSON value. When the upstream already wrote a member of that name, it is
// replaced (a slow path through a DOM: JSON objects must not repeat a name).
std::string with_member(const ReplyBody& body, std::string_view name, std::string_view value_json);

}  // namespace hengshi::cloud
