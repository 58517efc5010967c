// A JSON text parsed by simdjson into a document the caller keeps (a request's body), and the
// nlohmann DOM built from it on demand. simdjson validates and tokenises several times faster
// than nlohmann's own lexer, which read every request body character by character (the
// request's parse was about a tenth of the gateway's CPU at saturation: bench/overhead
// --saturate --profile). The DOM's values come out as nlohmann's parser makes them: non-negative
// integers unsigned, negative ones signed, the last of repeated member names (one exception:
// "-0" is an unsigned 0, not a signed one; equal, integral and dumped alike).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

namespace simdjson::dom {
class document;
class element;
}  // namespace simdjson::dom

namespace hengshi {

// What the text says that the DOM does not hold, for a caller deciding whether the text may
// stand in for the DOM.
struct TextBeyondDom {
  bool repeated_names = false;  // an object repeated a name: the DOM holds only the last value
  // A number with a fraction or exponent below the root's own members: the DOM holds a double
  // (about 17 digits), the text may carry more digits than that.
  bool nested_doubles = false;
};

// Parses `text` into `document` (its own two buffers, the tape and the strings, sized to the
// text). False when simdjson refuses the text (invalid JSON, or an integer beyond 64 bits, which
// nlohmann reads as a double) or it nests containers deeper than `max_depth`: the caller then
// takes nlohmann's parser, so what is accepted and every error stay nlohmann's. `beyond`, when
// given, is filled on success.
bool parse_json_document(std::string_view text, int max_depth, simdjson::dom::document& document,
                         TextBeyondDom* beyond = nullptr);

// The nlohmann DOM of a value of a parsed document.
nlohmann::json to_nlohmann(const simdjson::dom::element& element);

}  // namespace hengshi
