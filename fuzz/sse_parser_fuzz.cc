// Fuzzes cloud::SseParser with an event-stream body delivered in pieces whose sizes the fuzzer
// chooses (the tail of the input holds the cut points). The events must not depend on how the
// body was cut: they are compared with the same body appended in one piece, and again after
// reset() on the same parser (a pooled connection's next response).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cloud/sse_parser.h"
#include "fuzz_check.h"

namespace {

void drain(hengshi::cloud::SseParser& parser, std::vector<std::string>& events) {
  while (auto event = parser.next_event()) events.emplace_back(*event);
}

std::vector<std::string> parse_whole(hengshi::cloud::SseParser& parser, std::string_view body) {
  std::vector<std::string> events;
  parser.append(body);
  drain(parser, events);
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider provider(data, size);
  // ConsumeIntegral takes bytes from the end, so the body is a prefix of the input as written.
  std::vector<std::size_t> piece_sizes(provider.ConsumeIntegralInRange<std::size_t>(0, 16));
  for (auto& piece : piece_sizes) piece = provider.ConsumeIntegralInRange<std::size_t>(0, 64);
  const std::string body = provider.ConsumeRemainingBytesAsString();

  hengshi::cloud::SseParser parser;
  std::vector<std::string> split_events;
  std::string_view rest = body;
  for (std::size_t piece : piece_sizes) {
    const std::size_t n = std::min(piece, rest.size());
    parser.append(rest.substr(0, n));
    rest.remove_prefix(n);
    drain(parser, split_events);
    FUZZ_CHECK(parser.pending_bytes() <= body.size());
  }
  parser.append(rest);
  drain(parser, split_events);
  const std::size_t split_pending = parser.pending_bytes();

  hengshi::cloud::SseParser whole_parser;
  const auto whole_events = parse_whole(whole_parser, body);
  FUZZ_CHECK(split_events == whole_events);
  FUZZ_CHECK(split_pending == whole_parser.pending_bytes());

  parser.reset();
  FUZZ_CHECK(parser.pending_bytes() == 0);
  FUZZ_CHECK(parse_whole(parser, body) == whole_events);
  return 0;
}
