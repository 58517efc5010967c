#include "core/json_raw_members.h"

#include <algorithm>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace hengshi {
namespace {

// Written by hand: simdjson's DOM keeps no source offsets, and its on-demand reader (which does)
// compiles to its scalar fallback without -march flags. The text was validated already, so
// finding where a value ends is a skip; anything unexpected still returns npos, never a guess.
constexpr std::size_t npos = std::string_view::npos;

std::size_t skip_space(std::string_view text, std::size_t pos) {
  while (pos < text.size() &&
         (text[pos] == ' ' || text[pos] == '\t' || text[pos] == '\n' || text[pos] == '\r')) {
    ++pos;
  }
  return pos;
}

// `pos` at an opening quote: the offset just past its closing quote. Sixteen bytes are looked
// at a time (SSE2 is part of x86-64): the next quote or backslash is found, not searched for
// byte by byte.
std::size_t skip_string(std::string_view text, std::size_t pos) {
  ++pos;
  while (true) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    while (pos + 16 <= text.size()) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(text.data() + pos));
      const int special = _mm_movemask_epi8(
          _mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, backslash)));
      if (special != 0) {
        pos += static_cast<std::size_t>(__builtin_ctz(static_cast<unsigned>(special)));
        break;
      }
      pos += 16;
    }
#endif
    while (pos < text.size() && text[pos] != '"' && text[pos] != '\\') ++pos;
    if (pos >= text.size()) return npos;
    if (text[pos] == '"') return pos + 1;
    pos += 2;  // an escape's second byte is never the string's end
  }
}

// `pos` at a value's first byte: the offset just past its last.
std::size_t skip_value(std::string_view text, std::size_t pos) {
  if (pos >= text.size()) return npos;
  const char first = text[pos];
  if (first == '"') return skip_string(text, pos);
  if (first != '{' && first != '[') {  // a number, true, false or null: up to a delimiter
    while (pos < text.size()) {
      const char c = text[pos];
      if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r') break;
      ++pos;
    }
    return pos;
  }
  int depth = 0;
  while (pos < text.size()) {
    const char c = text[pos];
    if (c == '"') {
      pos = skip_string(text, pos);
      if (pos == npos) return npos;
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return pos + 1;
    }
    ++pos;
  }
  return npos;
}

}  // namespace

std::optional<std::string> json_raw_members(std::string_view object_text,
                                            std::span<const std::string_view> left_out) {
  std::size_t pos = skip_space(object_text, 0);
  if (pos >= object_text.size() || object_text[pos] != '{') return std::nullopt;
  std::string members;
  members.reserve(object_text.size());
  pos = skip_space(object_text, pos + 1);
  if (pos < object_text.size() && object_text[pos] == '}') return members;
  while (pos < object_text.size() && object_text[pos] == '"') {
    const std::size_t name_begin = pos;
    const std::size_t name_end = skip_string(object_text, pos);
    if (name_end == npos) return std::nullopt;
    const std::string_view name = object_text.substr(pos + 1, name_end - pos - 2);
    // An escaped name would need decoding to compare: rare enough to leave to the DOM.
    if (name.find('\\') != npos) return std::nullopt;
    pos = skip_space(object_text, name_end);
    if (pos >= object_text.size() || object_text[pos] != ':') return std::nullopt;
    const std::size_t value_begin = skip_space(object_text, pos + 1);
    const std::size_t value_end = skip_value(object_text, value_begin);
    if (value_end == npos) return std::nullopt;
    if (std::find(left_out.begin(), left_out.end(), name) == left_out.end()) {
      if (!members.empty()) members += ',';
      members.append(object_text.substr(name_begin, name_end - name_begin));
      members += ':';
      members.append(object_text.substr(value_begin, value_end - value_begin));
    }
    pos = skip_space(object_text, value_end);
    if (pos >= object_text.size()) return std::nullopt;
    if (object_text[pos] == '}') {
      // Only space may follow the object.
      return skip_space(object_text, pos + 1) == object_text.size() ? std::optional(std::move(members))
                                                                    : std::nullopt;
    }
    if (object_text[pos] != ',') return std::nullopt;
    pos = skip_space(object_text, pos + 1);
  }
  return std::nullopt;
}

}  // namespace hengshi
