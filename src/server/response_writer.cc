#include "server/response_writer.h"

#include <string>
#include <string_view>

#include "core/json_text.h"
#include "server/openai_format.h"
#include "server/sse.h"

namespace hengshi::server {

using namespace std::string_view_literals;

namespace {

using nlohmann::json;

// The metadata headers, each passed to `add(name, value)`: written into a Beast message (a
// stream's head, an error) or as text beside a whole answer's head.
template <typename Add>
void for_each_meta_header(const ResponseMeta& meta, Add&& add) {
  add("X-Hengshi-Request-Id", meta.request_id);
  add("X-Hengshi-Route", to_string(meta.decision.route));
  add("X-Hengshi-Reason", to_string(meta.decision.reason));
  add("X-Hengshi-Level", std::to_string(meta.level));
  add("X-Hengshi-Cache", meta.cache);
  if (meta.offline) add("X-Hengshi-Offline", "true");
  // The gateway's own answer after every model failed: served, but degraded.
  if (meta.cache == "stale"sv) {
    add("X-Hengshi-Degraded", "stale_cache");
  } else if (meta.level == static_cast<int>(Level::last_resort)) {
    add("X-Hengshi-Degraded", "last_resort");
  }
}

// Added to a fresh message, so insert, not set: set() looks the name up among Beast's known
// fields and erases any earlier copy first.
template <typename Message>
void set_meta_headers(Message& message, const ResponseMeta& meta) {
  for_each_meta_header(meta, [&message](std::string_view name, std::string_view value) {
    message.insert(http::field::unknown, boost::beast::string_view(name.data(), name.size()),
                   boost::beast::string_view(value.data(), value.size()));
  });
}

// The same headers as the lines of a head ("Name: value\r\n"), for HttpExchange::send(): Beast's
// fields keep a case-insensitive ordered index, and inserting names that share "X-Hengshi-"
// compared them character by character, about 450 instructions a header. The values are the
// gateway's own (ids, enum names, numbers): no line break can come from outside.
void append_header_line(std::string& lines, std::string_view name, std::string_view value) {
  lines.append(name).append(": ").append(value).append("\r\n");
}

std::string meta_header_lines(const ResponseMeta& meta) {
  std::string lines;
  lines.reserve(256);
  for_each_meta_header(meta, [&lines](std::string_view name, std::string_view value) {
    append_header_line(lines, name, value);
  });
  return lines;
}

}  // namespace

std::string retry_after_seconds(std::int64_t retry_after_ms) {
  return std::to_string(std::max<std::int64_t>(1, (retry_after_ms + 999) / 1000));
}

awaitable<bool> ResponseWriter::write_events(std::string_view events) {
  if (held_.empty()) co_return co_await exchange_.write_chunk(events);
  held_.append(events);
  const bool written = co_await exchange_.write_chunk(held_);
  held_.clear();
  co_return written;
}

awaitable<bool> ResponseWriter::write_event(const json& event) {
  std::string text = sse_event(dump_text(event));
  co_return co_await write_events(text);
}

awaitable<bool> ResponseWriter::open(const ResponseMeta& meta) {
  if (opened_) co_return true;
  opened_ = true;
  http::response<http::empty_body> head{http::status::ok, exchange_.request().version()};
  set_meta_headers(head, meta);
  co_return co_await exchange_.start_stream(std::move(head));
}

awaitable<bool> ResponseWriter::send_role_once(const ResponseMeta& meta) {
  if (role_sent_) co_return true;
  role_sent_ = true;
  // Built outside the co_await (GCC 12 rejects array temporaries inside a co_await expression).
  json delta = {{"role", "assistant"}, {"content", ""}};
  json chunk = completion_chunk(meta.request_id, meta.model, std::move(delta), "");
  co_return co_await write_event(chunk);
}

awaitable<bool> ResponseWriter::send(const chain::Piece& piece, const ResponseMeta& meta) {
  if (piece.kind == chain::Piece::Kind::upstream_chunk) {
    // Passed through as the upstream wrote it (it carries its own role and finish chunks). When
    // another chunk follows at once, this one waits for it: one write for a burst of chunks.
    role_sent_ = true;
    if (piece.more) {
      held_ += sse_event(piece.data);
      co_return true;
    }
    std::string event = sse_event(piece.data);
    co_return co_await write_events(event);
  }
  if (!co_await send_role_once(meta)) co_return false;
  json delta = {{"content", std::string(piece.data)}};
  json chunk = completion_chunk(meta.request_id, meta.model, std::move(delta), "");
  co_return co_await write_event(chunk);
}

awaitable<bool> ResponseWriter::finish_stream(const ResponseMeta& meta, const chain::Answer& answer) {
  const TokenUsage tokens{answer.usage.prompt, answer.usage.completion};
  if (!answer.pieces_carry_finish) {
    if (!co_await send_role_once(meta)) co_return false;
    if (!answer.content.empty()) {
      // Text the source produced after its pieces (e.g. the offline notice).
      json delta = {{"content", answer.content}};
      json chunk = completion_chunk(meta.request_id, meta.model, std::move(delta), "");
      if (!co_await write_event(chunk)) co_return false;
    }
    json finish = completion_chunk(meta.request_id, meta.model, json::object(), answer.finish_reason);
    if (!co_await write_event(finish)) co_return false;
    if (request_.include_usage) {
      json usage = usage_chunk(meta.request_id, meta.model, tokens);
      if (!co_await write_event(usage)) co_return false;
    }
  }
  // The metadata travels in a final chunk with no choices, the shape OpenAI uses for usage.
  std::string final_event = sse_event(
      with_last_member(metadata_chunk_text(meta.request_id, meta.model), "hengshi", client_meta_text(meta)));
  final_event += kSseDone;  // the metadata, [DONE] and the end of the body in one write
  held_ += final_event;
  const bool finished = co_await exchange_.finish_stream(held_);
  held_.clear();
  co_return finished;
}

awaitable<bool> ResponseWriter::write_answer(const ResponseMeta& meta, chain::Answer& answer) {
  if (request_.stream) return write_answer_as_stream(meta, answer);
  // Not a coroutine: the one write is send_text's; a level of our own would cost a frame.
  std::string meta_lines = meta_header_lines(meta);
  append_header_line(meta_lines, "X-Hengshi-Overhead-Us", std::to_string(meta.overhead_us));
  // The upstream's own bytes, passed through with our metadata spliced in (no re-serialising).
  const TokenUsage tokens{answer.usage.prompt, answer.usage.completion};
  std::string body =
      answer.upstream_body.present()
          ? cloud::with_member(answer.upstream_body, "hengshi", client_meta_text(meta))
          : with_last_member(completion_text(meta.request_id, meta.model, answer.content,
                                             answer.finish_reason, tokens),
                             "hengshi", client_meta_text(meta));
  return exchange_.send_text(http::status::ok, "application/json", std::move(body),
                             std::move(meta_lines));
}

awaitable<bool> ResponseWriter::write_answer_as_stream(const ResponseMeta& meta,
                                                       chain::Answer& answer) {
  if (!co_await open(meta)) co_return false;
  // Same event sequence as OpenAI: role, content, finish_reason, [usage], then our metadata.
  chain::Answer whole = answer;
  if (!co_await send_role_once(meta)) co_return false;
  json delta = {{"content", answer.content}};
  json chunk = completion_chunk(meta.request_id, meta.model, std::move(delta), "");
  if (!co_await write_event(chunk)) co_return false;
  whole.content.clear();
  whole.pieces_carry_finish = false;
  co_return co_await finish_stream(meta, whole);
}

awaitable<void> ResponseWriter::write_error(const ApiError& error, const ResponseMeta* meta,
                                            std::optional<std::int64_t> retry_after_ms) {
  if (opened_) {
    // Headers are gone: report the failure in-band as an error event, then end the stream.
    json event = error.to_json();
    if (meta) event["hengshi"] = client_meta(*meta);
    co_await write_event(event);
    co_await exchange_.finish_stream();
    exchange_.force_close();
    co_return;
  }
  Response response{static_cast<http::status>(error.status), exchange_.request().version()};
  response.set(http::field::content_type, "application/json");
  json body = error.to_json();
  if (meta) {
    set_meta_headers(response, *meta);
    body["hengshi"] = client_meta(*meta);
  }
  if (error.status == 429 || (error.status == 503 && retry_after_ms)) {
    response.set(http::field::retry_after, retry_after_seconds(retry_after_ms.value_or(1000)));
  }
  response.body() = dump_text(body);
  co_await exchange_.send(std::move(response));
}

}  // namespace hengshi::server
