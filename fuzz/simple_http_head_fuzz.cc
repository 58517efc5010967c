// Fuzzes the fast HTTP head readers against Beast's parsers: whatever read_simple_reply or
// read_simple_request accepts, Beast must accept with the same meaning (status or request line,
// every field in order, keep-alive, body, length), read as the gateway reads a buffered message
// (core/parse_buffered.h, whose loop is repeated here: its header brings in Asio's coroutine
// support, which clang 15 does not enable in Boost 1.74). The first input byte picks the reader
// (its low bit: 1 a request) and the body limit (the rest; 0 is 1 MiB), so limits near a
// Content-Length are tried too.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "core/simple_http_head.h"
#include "fuzz_check.h"

namespace http = boost::beast::http;

namespace {

// Feeds `bytes` to `parser` as parse_buffered does; the bytes it took, or 0 on an error or when
// it is not done.
template <class Parser>
std::size_t beast_reads(Parser& parser, std::string_view bytes) {
  boost::beast::flat_buffer buffer;
  auto room = buffer.prepare(bytes.size());
  std::memcpy(room.data(), bytes.data(), bytes.size());
  buffer.commit(bytes.size());
  boost::beast::error_code ec;
  while (buffer.size() > 0 && !parser.is_done()) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec || used == 0) break;
  }
  return !ec && parser.is_done() ? bytes.size() - buffer.size() : 0;
}

void check_reply(std::string_view bytes, std::uint64_t limit) {
  const auto simple = hengshi::read_simple_reply(bytes, limit);
  if (!simple) return;
  http::response_parser<http::string_body> parser;
  parser.body_limit(limit);
  FUZZ_CHECK(beast_reads(parser, bytes) == simple->size);
  FUZZ_CHECK(parser.get().result_int() == simple->status);
  FUZZ_CHECK(parser.keep_alive() == simple->keep_alive);
  FUZZ_CHECK(parser.get().body() == simple->body);
}

void check_request(std::string_view bytes, std::uint64_t limit) {
  http::request<http::string_body> simple;
  const std::size_t size = hengshi::read_simple_request(bytes, limit, simple);
  if (size == 0) {
    FUZZ_CHECK(simple.begin() == simple.end());
    return;
  }
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(limit);
  FUZZ_CHECK(beast_reads(parser, bytes) == size);
  const auto& beast = parser.get();
  // The message's keep_alive(), which the server reads (HttpExchange), not the parser's: with two
  // Connection fields Beast's message reads the first and its parser both.
  FUZZ_CHECK(beast.keep_alive() == simple.keep_alive());
  FUZZ_CHECK(beast.method() == simple.method() && beast.method_string() == simple.method_string());
  FUZZ_CHECK(beast.target() == simple.target() && beast.version() == simple.version());
  FUZZ_CHECK(beast.body() == simple.body());
  auto b = beast.begin();
  auto f = simple.begin();
  for (; b != beast.end() && f != simple.end(); ++b, ++f) {
    FUZZ_CHECK(b->name() == f->name() && b->name_string() == f->name_string() &&
               b->value() == f->value());
  }
  FUZZ_CHECK(b == beast.end() && f == simple.end());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint64_t limit = (data[0] >> 1) == 0 ? 1u << 20 : data[0] >> 1;
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    check_request(bytes, limit);
  } else {
    check_reply(bytes, limit);
  }
  return 0;
}
