// parse_buffered: an HTTP message parsed from bytes already read, without a Beast read operation.
//
// A small request or reply usually arrives whole with its first read. Beast's asynchronous reads
// would parse it too, but each is a composed operation, and one that needs no I/O still completes
// through the scheduler (Asio 1.74); so the gateway reads once into the buffer itself and parses
// here, leaving Beast's reads for a message that arrives in pieces.
#pragma once

#include "core/asio.h"

namespace hengshi {

// The bytes `buffer` holds, as text (for the fast head readers, core/simple_http_head.h).
inline std::string_view buffered_text(const beast::flat_buffer& buffer) {
  const auto bytes = buffer.data();
  return {static_cast<const char*>(bytes.data()), bytes.size()};
}

// Feeds what `buffer` holds to `parser`, the header and then the body, and consumes it. On return
// the parser is done, or wants more bytes (ec clear), or the bytes are malformed or over a limit
// (ec set: Beast's parse errors, e.g. http::error::body_limit). Not in Beast's eager mode: Beast
// 1.74 then parses on past a header whose Content-Length is over the body limit and drops the
// error.
template <class Parser>
void parse_buffered(Parser& parser, beast::flat_buffer& buffer, beast::error_code& ec) {
  while (buffer.size() > 0 && !parser.is_done()) {
    const std::size_t used = parser.put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) {
      ec = {};
      return;
    }
    if (ec || used == 0) return;
  }
}

}  // namespace hengshi
