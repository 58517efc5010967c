#include "core/simple_http_head.h"

#include <array>

#include "core/byte_word.h"

#include <boost/beast/http/field.hpp>
#include <boost/beast/http/verb.hpp>

namespace hengshi {
namespace {

using namespace std::string_view_literals;

// Whether a byte may be part of a field name: RFC 9110's tchar, Beast's token table.
constexpr std::array<bool, 256> kTokenByte = [] {
  std::array<bool, 256> table{};
  for (char c : "!#$%&'*+-.^_`|~"sv) table[static_cast<unsigned char>(c)] = true;
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) table[c] = true;
  return table;
}();

// The first byte at or after `p` that is not visible ASCII (or a space, with `spaces`), or `end`.
// Eight bytes a step: values and targets are most of a head's bytes.
const char* skip_text(const char* p, const char* end, bool spaces) {
  const unsigned char lowest = spaces ? 0x20 : 0x21;
  while (end - p >= 8) {
    const std::uint64_t word = load_word(p);
    if (has_high_byte(word) || has_byte_below(word, lowest) || has_byte(word, 0x7f)) break;
    p += 8;
  }
  while (p < end && static_cast<unsigned char>(*p) >= lowest &&
         static_cast<unsigned char>(*p) < 0x7f)
    ++p;
  return p;
}

// `text` equals the lower-case `name`, ignoring ASCII case. By hand, not beast::iequals: that is
// an out-of-line call per compare, about 450 instructions a proxied request more (callgrind).
bool names_equal(std::string_view text, std::string_view name) {
  if (text.size() != name.size()) return false;
  for (std::size_t k = 0; k < text.size(); ++k) {
    char c = text[k];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != name[k]) return false;
  }
  return true;
}

// What the fields of a head say about framing and the connection.
struct Framing {
  std::optional<std::uint64_t> content_length;
  bool close = false;
};

// Reads the fields from `p` through the blank line that ends the head, within `end`, calling
// `on_field(name, value)` for each (false from it declines). False when a field is outside the
// subset, or the head does not end within `end`.
template <class OnField>
bool read_fields(const char*& p, const char* end, Framing& framing, OnField&& on_field) {
  for (;;) {
    if (end - p < 2) return false;
    if (p[0] == '\r' && p[1] == '\n') {
      p += 2;
      return true;
    }
    const char* name_begin = p;
    while (p < end && kTokenByte[static_cast<unsigned char>(*p)]) ++p;
    if (p == name_begin || p == end || *p != ':') return false;
    const std::string_view name(name_begin, static_cast<std::size_t>(p - name_begin));
    ++p;
    while (p < end && *p == ' ') ++p;
    const char* value_begin = p;
    p = skip_text(p, end, /*spaces=*/true);
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return false;
    const std::string_view value(value_begin, static_cast<std::size_t>(p - value_begin));
    p += 2;
    if (!value.empty() && value.back() == ' ') return false;  // Beast trims it; not read here
    if (!on_field(name, value)) return false;

    // Only the fields that frame the message or govern the connection matter to a reader; the
    // rest are skipped, so a name is compared only when its length is one of theirs.
    switch (name.size()) {
      case 14:  // content-length
        if (names_equal(name, "content-length")) {
          if (framing.content_length || value.empty() || value.size() > 18) return false;
          std::uint64_t length = 0;
          for (char c : value) {
            if (c < '0' || c > '9') return false;
            length = length * 10 + static_cast<std::uint64_t>(c - '0');
          }
          framing.content_length = length;
        }
        break;
      case 10:  // connection
        if (names_equal(name, "connection")) {
          if (names_equal(value, "close")) {
            framing.close = true;
          } else if (!names_equal(value, "keep-alive")) {
            return false;
          }
        }
        break;
      case 17:  // transfer-encoding
        if (names_equal(name, "transfer-encoding")) return false;
        break;
      case 16:  // proxy-connection
        if (names_equal(name, "proxy-connection")) return false;
        break;
      case 7:  // upgrade
        if (names_equal(name, "upgrade")) return false;
        break;
      default:
        break;
    }
  }
}

}  // namespace

std::optional<SimpleReply> read_simple_reply(std::string_view bytes, std::uint64_t body_limit) {
  constexpr std::string_view kVersion = "HTTP/1.1 ";
  const std::string_view window = bytes.substr(0, kSimpleHeadLimit);
  if (!window.starts_with(kVersion) || window.size() < kVersion.size() + 4) return std::nullopt;
  const char* p = window.data() + kVersion.size();
  const char* const end = window.data() + window.size();
  if (p[0] != '2' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9' || p[3] != ' ') {
    return std::nullopt;
  }
  const unsigned status =
      200 + static_cast<unsigned>(p[1] - '0') * 10 + static_cast<unsigned>(p[2] - '0');
  if (status == 204) return std::nullopt;  // no body whatever the fields say
  p += 4;
  p = skip_text(p, end, /*spaces=*/true);  // the reason phrase
  if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return std::nullopt;
  p += 2;

  Framing framing;
  if (!read_fields(p, end, framing, [](std::string_view, std::string_view) { return true; }) ||
      !framing.content_length) {
    return std::nullopt;
  }
  const auto head_size = static_cast<std::size_t>(p - bytes.data());
  const std::uint64_t length = *framing.content_length;
  if (length > body_limit || length > bytes.size() - head_size) return std::nullopt;
  SimpleReply reply;
  reply.status = status;
  reply.size = head_size + static_cast<std::size_t>(length);
  reply.body = bytes.substr(head_size, static_cast<std::size_t>(length));
  reply.keep_alive = !framing.close;
  return reply;
}

std::size_t read_simple_request(
    std::string_view bytes, std::uint64_t body_limit,
    boost::beast::http::request<boost::beast::http::string_body>& request) {
  namespace http = boost::beast::http;
  const std::string_view window = bytes.substr(0, kSimpleHeadLimit);
  const char* p = window.data();
  const char* const end = window.data() + window.size();
  http::verb method;
  if (window.starts_with("POST "sv)) {
    method = http::verb::post;
    p += 5;
  } else if (window.starts_with("GET "sv)) {
    method = http::verb::get;
    p += 4;
  } else {
    return 0;
  }
  const char* target_begin = p;
  p = skip_text(p, end, /*spaces=*/false);
  const std::string_view target(target_begin, static_cast<std::size_t>(p - target_begin));
  constexpr std::string_view kVersion = " HTTP/1.1\r\n";
  if (target.empty() ||
      !std::string_view(p, static_cast<std::size_t>(end - p)).starts_with(kVersion))
    return 0;
  p += kVersion.size();

  struct Field {
    std::string_view name, value;
  };
  std::array<Field, kSimpleHeadFields> fields;
  std::size_t count = 0;
  Framing framing;
  const bool read =
      read_fields(p, end, framing, [&](std::string_view name, std::string_view value) {
        if (count == fields.size()) return false;
        fields[count++] = {name, value};
        return true;
      });
  if (!read) return 0;
  const auto head_size = static_cast<std::size_t>(p - bytes.data());
  const std::uint64_t length = framing.content_length.value_or(0);
  if (length > body_limit || length > bytes.size() - head_size) return 0;

  request.method(method);
  request.target(boost::beast::string_view(target.data(), target.size()));
  request.version(11);
  for (std::size_t k = 0; k < count; ++k) {
    const boost::beast::string_view name(fields[k].name.data(), fields[k].name.size());
    request.insert(http::string_to_field(name), name,
                   boost::beast::string_view(fields[k].value.data(), fields[k].value.size()));
  }
  request.body().assign(bytes.substr(head_size, static_cast<std::size_t>(length)));
  return head_size + static_cast<std::size_t>(length);
}

}  // namespace hengshi
