// SseParser: incremental parser for a text/event-stream body (the WHATWG "server-sent events"
// format that OpenAI streams use). Bytes are appended as they arrive, in pieces of any size;
// next_event() yields the data of each complete event. Only "data:" fields matter to us: other
// fields (event, id, retry) and ":" comment lines are skipped.
//
// Not thread-safe; one parser per connection, reset() between responses. Its buffers keep their
// capacity across reset() so a pooled connection parses without allocating.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace hengshi::cloud {

class SseParser {
 public:
  void reset();

  // Appends the next bytes of the body.
  void append(std::string_view bytes);

  // The data of the next complete event (several data lines joined by '\n'), or nullopt when
  // no complete event is buffered. The view stays valid until the next append()/next_event().
  std::optional<std::string_view> next_event();

  // Bytes received but not yet part of a complete event.
  std::size_t pending_bytes() const { return buffer_.size() - consumed_; }

 private:
  std::string buffer_;  // received bytes; [consumed_, end) not yet parsed
  std::size_t consumed_ = 0;
  std::string data_;       // data of the event being assembled
  bool has_data_ = false;  // the current event has at least one data field
  bool skip_lf_ = false;   // the last line ended with '\r'; a following '\n' belongs to it
};

}  // namespace hengshi::cloud
