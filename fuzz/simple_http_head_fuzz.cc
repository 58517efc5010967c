// Fuzzes read_simple_reply against Beast's response parser: whatever the fast reader accepts,
// Beast must accept with the same status, keep-alive, body and length, read as the upstream
// client reads a buffered reply (core/parse_buffered.h, whose loop is repeated here: its header
// brings in Asio's coroutine support, which clang 15 does not enable in Boost 1.74). The first
// input byte picks the body limit, so limits near a Content-Length are tried too.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "core/simple_http_head.h"
#include "fuzz_check.h"

namespace http = boost::beast::http;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint64_t limit = data[0] == 0 ? 1u << 20 : data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  const auto simple = hengshi::read_simple_reply(bytes, limit);
  if (!simple) return 0;

  http::response_parser<http::string_body> parser;
  parser.body_limit(limit);
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
  FUZZ_CHECK(!ec);
  FUZZ_CHECK(parser.is_done());
  FUZZ_CHECK(parser.get().result_int() == simple->status);
  FUZZ_CHECK(parser.keep_alive() == simple->keep_alive);
  FUZZ_CHECK(parser.get().body() == simple->body);
  FUZZ_CHECK(bytes.size() - buffer.size() == simple->size);
  return 0;
}
