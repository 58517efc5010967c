#include "server/sse.h"

namespace hengshi::server {

std::string sse_event(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  std::size_t start = 0;
  while (true) {
    auto newline = payload.find('\n', start);
    std::string_view line = payload.substr(start, newline == std::string_view::npos
                                                      ? std::string_view::npos
                                                      : newline - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out += "data: ";
    out += line;
    out += '\n';
    if (newline == std::string_view::npos) break;
    start = newline + 1;
  }
  out += '\n';
  return out;
}

}  // namespace hengshi::server
