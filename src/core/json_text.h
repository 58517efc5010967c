// JSON text that came from outside (a client body, an upstream response, a file): the two rules
// the gateway keeps for it.
//   1. Never dump() strictly: invalid UTF-8 in a string makes nlohmann throw, and an exception
//      on a connection's path is a dropped request. dump_text() replaces bad bytes with U+FFFD.
//   2. Bound the nesting before parsing: parsing is iterative, but dump() recurses, so a 1 MiB
//      "[[[[..." parses fine and overflows the stack when it is forwarded.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hengshi {

// Deepest nesting the gateway accepts in a request or an upstream response.
inline constexpr int kMaxJsonDepth = 64;

// Compact JSON, invalid UTF-8 replaced by U+FFFD. Never throws on content. The bytes are
// nlohmann's dump() (same escapes, same number text) for valid UTF-8; written by hand because
// nlohmann's serializer decodes every byte through a UTF-8 state machine, which made the
// upstream body most of a proxied request's serialising.
std::string dump_text(const nlohmann::json& value);
// dump_text(value) appended to `out`, without a string of its own in between (the upstream
// body is written this way, one top-level member at a time).
void append_dump_text(std::string& out, const nlohmann::json& value);

// True when `text` nests arrays/objects deeper than `max_depth` (strings are skipped, so
// brackets inside them do not count). Linear, no allocation; malformed JSON is the parser's job.
bool json_nesting_exceeds(std::string_view text, int max_depth = kMaxJsonDepth);

// `text` with invalid UTF-8 sequences replaced by U+FFFD (for messages and headers built from
// outside bytes).
std::string valid_utf8(std::string_view text);

// `text` as a JSON string literal (quoted, escaped) appended to `out`; invalid UTF-8 becomes
// U+FFFD, as dump_text() does. For JSON the gateway writes itself, without a DOM.
void append_json_string(std::string& out, std::string_view text);

// A number as JSON (shortest text that reads back the same); null when not finite.
void append_json_number(std::string& out, double value);

// Numbers as dump_text() writes a DOM's: integers in decimal, a double in nlohmann's own text
// ("1.0", "0.0001", "1e+20"), null when not finite. The writers of a DOM's text from another
// parse (core/json_members.h) use these too, so both write the same bytes.
void append_dom_integer(std::string& out, std::int64_t value);
void append_dom_integer(std::string& out, std::uint64_t value);
void append_dom_double(std::string& out, double value);

// `object_text` (one serialised JSON object without a member called `name`) with
// `"name": value_json` added as its last member. `name` is a fixed ASCII name of the gateway's.
std::string with_last_member(std::string_view object_text, std::string_view name, std::string_view value_json);

// At most `max_bytes` of `text`, cut on a character boundary (never mid-sequence), with "..."
// appended when something was cut. Invalid bytes are replaced first.
std::string utf8_snippet(std::string_view text, std::size_t max_bytes);

}  // namespace hengshi
