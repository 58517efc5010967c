#include "core/simple_http_head.h"

#include <array>

namespace hengshi {
namespace {

using namespace std::string_view_literals;

// What a byte may be in the subset: part of a field name (RFC 9110 tchar, Beast's token table),
// part of a field value or reason phrase (visible ASCII and space), or neither.
enum ByteClass : unsigned char { kOther = 0, kText = 1, kToken = 2 };

constexpr std::array<unsigned char, 256> kByteClass = [] {
  std::array<unsigned char, 256> table{};
  for (int c = 0x20; c <= 0x7e; ++c) table[c] = kText;
  for (char c : "!#$%&'*+-.^_`|~"sv) table[static_cast<unsigned char>(c)] |= kToken;
  for (int c = '0'; c <= '9'; ++c) table[c] |= kToken;
  for (int c = 'a'; c <= 'z'; ++c) table[c] |= kToken;
  for (int c = 'A'; c <= 'Z'; ++c) table[c] |= kToken;
  return table;
}();

bool is(char c, ByteClass kind) { return (kByteClass[static_cast<unsigned char>(c)] & kind) != 0; }

// `token` (token characters) equals the lower-case `name`, ignoring ASCII case.
bool names_equal(std::string_view token, std::string_view name) {
  if (token.size() != name.size()) return false;
  for (std::size_t k = 0; k < token.size(); ++k) {
    char c = token[k];
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

// Reads the fields from `p` through the blank line that ends the head, within `end`. False when
// a field is outside the subset, or the head does not end within `end`.
bool read_fields(const char*& p, const char* end, Framing& framing) {
  for (;;) {
    if (end - p < 2) return false;
    if (p[0] == '\r' && p[1] == '\n') {
      p += 2;
      return true;
    }
    const char* name_begin = p;
    while (p < end && is(*p, kToken)) ++p;
    if (p == name_begin || p == end || *p != ':') return false;
    const std::string_view name(name_begin, static_cast<std::size_t>(p - name_begin));
    ++p;
    while (p < end && *p == ' ') ++p;
    const char* value_begin = p;
    while (p < end && is(*p, kText)) ++p;
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return false;
    const std::string_view value(value_begin, static_cast<std::size_t>(p - value_begin));
    p += 2;
    if (!value.empty() && value.back() == ' ') return false;  // Beast trims it; not read here

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
  while (p < end && is(*p, kText)) ++p;  // the reason phrase
  if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return std::nullopt;
  p += 2;

  Framing framing;
  if (!read_fields(p, end, framing) || !framing.content_length) return std::nullopt;
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

}  // namespace hengshi
