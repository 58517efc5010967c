// Server-sent events framing for OpenAI-style streams: each event is `data: <payload>\n\n` and the
// stream ends with `data: [DONE]\n\n`. Payloads are single-line JSON; a payload with newlines is
// split over several data: lines as the SSE spec requires.
#pragma once

#include <string>
#include <string_view>

namespace hengshi::server {

std::string sse_event(std::string_view payload);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace hengshi::server
