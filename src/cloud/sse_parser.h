// SseParser: incremental parser for a text/event-stream body (the WHATWG "server-sent events"
// format that OpenAI streams use). Bytes are appended as they arrive, in pieces of any size;
// next_event() yields the data of each complete event. Only "data:" fields matter to us: other
// fields (event, id, retry) and ":" comment lines are skipped.
//
// Bounded: a line or an event's data longer than max_event_bytes puts the parser in a failed
// state (failed(), error()) instead of growing without limit; the caller then abandons the
// response. Buffers then hold at most max_event_bytes plus one append().
//
// Not thread-safe; one parser per connection, reset() between responses. Its buffers keep their
// capacity across reset() so a pooled connection parses without allocating.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hengshi::cloud {

inline constexpr std::size_t kDefaultMaxSseEventBytes = 1 << 20;  // 1 MiB

class SseParser {
 public:
  explicit SseParser(std::size_t max_event_bytes = kDefaultMaxSseEventBytes)
      : max_event_bytes_(max_event_bytes) {}

  // Forgets the current response, the failed state included.
  void reset();

  // Appends the next bytes of the body (ignored once failed()).
  void append(std::string_view bytes);

  // The data of the next complete event (several data lines joined by '\n'), or nullopt when
  // no complete event is buffered or the parser has failed. The view stays valid until the next
  // append()/next_event().
  std::optional<std::string_view> next_event();

  // A line or an event was longer than max_event_bytes; error() says which.
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }

  // Bytes received but not yet part of a complete event.
  std::size_t pending_bytes() const { return buffer_.size() - consumed_; }
  // Bytes the parser holds (unparsed input and the event being assembled): what a response
  // costs in memory while it streams.
  std::size_t buffered_bytes() const { return buffer_.size() + data_.size(); }

 private:
  void fail(std::string reason);

  std::size_t max_event_bytes_;
  std::string error_;   // empty unless failed
  std::string buffer_;  // received bytes; [consumed_, end) not yet parsed
  std::size_t consumed_ = 0;
  // [consumed_, scanned_) holds no line end: a long line is scanned once, not on every append.
  std::size_t scanned_ = 0;
  std::string data_;       // data of the event being assembled
  bool has_data_ = false;  // the current event has at least one data field
  bool skip_lf_ = false;   // the last line ended with '\r'; a following '\n' belongs to it
};

}  // namespace hengshi::cloud
