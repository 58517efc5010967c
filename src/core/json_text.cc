#include "core/json_text.h"

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/byte_word.h"

namespace hengshi {

namespace {

template <typename Integer>
void append_integer(std::string& out, Integer value) {
  char digits[24];
  out.append(digits, std::to_chars(digits, digits + sizeof digits, value).ptr);
}

}  // namespace

void append_dom_integer(std::string& out, std::int64_t value) { append_integer(out, value); }
void append_dom_integer(std::string& out, std::uint64_t value) { append_integer(out, value); }

void append_dom_double(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char digits[64];
  out.append(digits, nlohmann::detail::to_chars(digits, digits + sizeof digits, value));
}

std::string dump_text(const nlohmann::json& value) {
  std::string out;
  append_dump_text(out, value);
  return out;
}

void append_dump_text(std::string& out, const nlohmann::json& value) {
  using Type = nlohmann::json::value_t;
  switch (value.type()) {
    case Type::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, member] : value.get_ref<const nlohmann::json::object_t&>()) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, key);
        out += ':';
        append_dump_text(out, member);
      }
      out += '}';
      return;
    }
    case Type::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value.get_ref<const nlohmann::json::array_t&>()) {
        if (!first) out += ',';
        first = false;
        append_dump_text(out, item);
      }
      out += ']';
      return;
    }
    case Type::string: append_json_string(out, value.get_ref<const std::string&>()); return;
    case Type::boolean: out += value.get<bool>() ? "true" : "false"; return;
    case Type::number_integer: append_dom_integer(out, value.get<std::int64_t>()); return;
    case Type::number_unsigned: append_dom_integer(out, value.get<std::uint64_t>()); return;
    case Type::number_float: append_dom_double(out, value.get<double>()); return;
    case Type::null:
    case Type::discarded: out += "null"; return;
    case Type::binary:  // never parsed from text, never on a request's path: nlohmann's own form
      out += value.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
      return;
  }
}

bool json_nesting_exceeds(std::string_view text, int max_depth) {
  // Hand-written: nlohmann has no depth limit, and a byte scan is cheaper than a SAX wrapper.
  int depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

namespace {

// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one
// (RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF).
std::size_t sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t length = 0;
  unsigned char low = 0x80;
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

// Whether the 8 bytes at `p` are all plain ASCII in a JSON string (no control character, quote,
// backslash or byte above 0x7F).
bool plain_word(const char* p) {
  const std::uint64_t word = load_word(p);
  return !has_high_byte(word) && !has_byte_below(word, 0x20) && !has_byte(word, '"') && !has_byte(word, '\\');
}

// Appends the UTF-8 sequence at text[i], or U+FFFD for an invalid byte; returns the bytes read.
std::size_t append_sequence(std::string& out, std::string_view text, std::size_t i) {
  const std::size_t length = sequence_length(text, i);
  if (length == 0) {
    out += kReplacement;
    return 1;
  }
  out.append(text.substr(i, length));
  return length;
}

}  // namespace

std::string valid_utf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) i += append_sequence(out, text, i);
  return out;
}

void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  // Runs of plain ASCII go out in one append: a byte at a time was most of a dump's cost.
  const auto plain = [](unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; };
  out.reserve(out.size() + text.size() + 2);
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    std::size_t run = i;
    while (run + 8 <= text.size() && plain_word(text.data() + run)) run += 8;
    while (run < text.size() && plain(static_cast<unsigned char>(text[run]))) ++run;
    out.append(text.data() + i, run - i);
    i = run;
    if (i == text.size()) break;
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      i += append_sequence(out, text, i);
      continue;
    }
    switch (c) {  // the escapes nlohmann writes, so the same value dumps to the same bytes
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
    }
    ++i;
  }
  out += '"';
}

void append_json_number(std::string& out, double value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char digits[32];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

std::string with_last_member(std::string_view object_text, std::string_view name, std::string_view value_json) {
  const std::size_t close = object_text.find_last_of('}');
  const bool empty = object_text.find_first_not_of(" \t\r\n", object_text.find('{') + 1) == close;
  std::string out;
  out.reserve(object_text.size() + name.size() + value_json.size() + 4);
  out.append(object_text.substr(0, close));
  if (!empty) out += ',';
  out += '"';
  out += name;
  out += "\":";
  out += value_json;
  out += '}';
  return out;
}

std::string utf8_snippet(std::string_view text, std::size_t max_bytes) {
  std::string clean = valid_utf8(text);
  if (clean.size() <= max_bytes) return clean;
  std::size_t cut = max_bytes;
  // Back up over continuation bytes so the cut falls between characters.
  while (cut > 0 && (static_cast<unsigned char>(clean[cut]) & 0xC0) == 0x80) --cut;
  clean.resize(cut);
  clean += "...";
  return clean;
}

}  // namespace hengshi
