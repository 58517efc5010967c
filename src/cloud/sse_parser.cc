#include "cloud/sse_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace hengshi::cloud {
namespace {

// The first '\r' or '\n' at or after `from`, or npos. Two memchr calls: std::string's
// find_first_of("\r\n") searches the two-byte set once per byte, which made the line scan
// most of a stream's parsing.
std::size_t find_line_end(const std::string& text, std::size_t from) {
  if (from >= text.size()) return std::string::npos;
  const char* begin = text.data() + from;
  std::size_t length = text.size() - from;
  const void* lf = std::memchr(begin, '\n', length);
  if (lf != nullptr) length = static_cast<std::size_t>(static_cast<const char*>(lf) - begin);
  const void* cr = std::memchr(begin, '\r', length);  // only before the first '\n'
  const void* end = cr != nullptr ? cr : lf;
  return end == nullptr ? std::string::npos : from + static_cast<std::size_t>(static_cast<const char*>(end) - begin);
}

}  // namespace

void SseParser::reset() {
  buffer_.clear();
  consumed_ = 0;
  scanned_ = 0;
  data_.clear();
  has_data_ = false;
  skip_lf_ = false;
  error_.clear();
}

void SseParser::fail(std::string reason) {
  error_ = std::move(reason);
  // Nothing more is parsed; the memory goes back at once (a failed parser is not reused as is).
  buffer_.clear();
  consumed_ = 0;
  scanned_ = 0;
  data_.clear();
  has_data_ = false;
}

void SseParser::append(std::string_view bytes) {
  if (failed()) return;
  // Drop what has been parsed before growing, so the buffer stays the size of one event.
  if (consumed_ > 0) {
    buffer_.erase(0, consumed_);
    scanned_ = scanned_ > consumed_ ? scanned_ - consumed_ : 0;
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<std::string_view> SseParser::next_event() {
  for (;;) {
    if (failed()) return std::nullopt;
    if (skip_lf_ && consumed_ < buffer_.size()) {
      if (buffer_[consumed_] == '\n') ++consumed_;
      skip_lf_ = false;
    }
    std::size_t line_end = find_line_end(buffer_, std::max(consumed_, scanned_));
    if (line_end == std::string::npos) {
      scanned_ = buffer_.size();
      if (pending_bytes() > max_event_bytes_) {
        fail("an event line is longer than " + std::to_string(max_event_bytes_) + " bytes");
      }
      return std::nullopt;
    }
    if (line_end - consumed_ > max_event_bytes_) {
      fail("an event line is longer than " + std::to_string(max_event_bytes_) + " bytes");
      return std::nullopt;
    }
    std::string_view line(buffer_.data() + consumed_, line_end - consumed_);
    skip_lf_ = buffer_[line_end] == '\r';
    consumed_ = line_end + 1;

    if (line.empty()) {  // blank line: dispatch the event, if it carried data
      if (!has_data_) continue;
      has_data_ = false;
      // Hand out a view of data_; it is cleared when the next data field starts.
      return std::string_view(data_);
    }
    if (line.front() == ':') continue;  // comment (keep-alive pings)
    std::string_view field = line;
    std::string_view value;
    if (auto colon = line.find(':'); colon != std::string_view::npos) {
      field = line.substr(0, colon);
      value = line.substr(colon + 1);
      if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    }
    if (field != "data") continue;
    if ((has_data_ ? data_.size() + 1 : 0) + value.size() > max_event_bytes_) {
      fail("an event's data is longer than " + std::to_string(max_event_bytes_) + " bytes");
      return std::nullopt;
    }
    if (!has_data_) {
      data_.clear();
      has_data_ = true;
    } else {
      data_ += '\n';
    }
    data_.append(value);
  }
}

}  // namespace hengshi::cloud
