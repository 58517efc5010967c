// simple_http_head: the usual shape of an HTTP/1.1 head, read in one pass, with Beast's parser
// left for everything else.
//
// Beast's parser spends about 600 instructions a field (a name lookup in its field table for
// every field, a token-list parse of Connection, a search for the head's end before the parse):
// about 4k for each of the two heads a proxied request reads, where the gateway reads almost
// nothing of either. These readers accept a strict subset of what Beast accepts, and give it the
// same meaning: a message they decline (nullopt) goes to Beast's parser unchanged, which then
// accepts or rejects it as before. tests/core/simple_http_head_test.cc and the differential
// fuzzer (fuzz/simple_http_head_fuzz.cc) check that what they accept, Beast accepts with the same
// meaning: status or request line, every field, keep-alive, body and length.
//
// The subset: "HTTP/1.1", CRLF line ends, field names of token characters, field values of
// visible ASCII and spaces (no tab, no byte over 0x7e, no trailing space, no obs-fold), a
// Content-Length that appears once, Connection only as "close" or "keep-alive", and no
// Transfer-Encoding, Proxy-Connection or Upgrade. The whole head is at most kSimpleHeadLimit bytes
// (Beast's default limit is 8 KiB) and the whole body is in the bytes given.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>

namespace hengshi {

inline constexpr std::size_t kSimpleHeadLimit = 4096;

// An upstream's reply, head and body, as a plain client reads it.
struct SimpleReply {
  unsigned status = 0;     // 200-299, never 204 (a reply without a body)
  std::size_t size = 0;    // bytes of the message: head, blank line and body
  std::string_view body;   // a view into the bytes given
  bool keep_alive = true;  // false with "Connection: close"
};

// The reply at the start of `bytes` when it is a 2xx answer in the subset above, with a
// Content-Length of at most `body_limit` and all of its body present; nullopt otherwise (Beast's
// parser then reads it: an error status, a chunked or oversized body, a head or body still
// arriving, anything unusual).
std::optional<SimpleReply> read_simple_reply(std::string_view bytes, std::uint64_t body_limit);

// The request at the start of `bytes` when it is a GET or a POST in the subset above, with a
// target of visible ASCII, at most kSimpleHeadFields fields, and all of its body (a
// Content-Length of at most `body_limit`; none means no body) present: written into `request`,
// a default-constructed message, as Beast's request parser would (every field in order, under
// the enum Beast gives its name), returning the bytes it took. 0 when declined, `request`
// untouched: Beast's parser then reads it (another method, a chunked or oversized body, a head
// or body still arriving, anything unusual).
inline constexpr std::size_t kSimpleHeadFields = 32;
std::size_t read_simple_request(
    std::string_view bytes, std::uint64_t body_limit,
    boost::beast::http::request<boost::beast::http::string_body>& request);

}  // namespace hengshi
