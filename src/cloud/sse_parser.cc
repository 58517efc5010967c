#include "cloud/sse_parser.h"

namespace hengshi::cloud {

void SseParser::reset() {
  buffer_.clear();
  consumed_ = 0;
  data_.clear();
  has_data_ = false;
  skip_lf_ = false;
}

void SseParser::append(std::string_view bytes) {
  // Drop what has been parsed before growing, so the buffer stays the size of one event.
  if (consumed_ > 0) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<std::string_view> SseParser::next_event() {
  for (;;) {
    if (skip_lf_ && consumed_ < buffer_.size()) {
      if (buffer_[consumed_] == '\n') ++consumed_;
      skip_lf_ = false;
    }
    std::size_t line_end = buffer_.find_first_of("\r\n", consumed_);
    if (line_end == std::string::npos) return std::nullopt;
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
