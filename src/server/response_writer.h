// ResponseWriter: the one place a chat completion's answer or error is written to the client —
// JSON, or SSE in OpenAI's event sequence (role, content, finish_reason, [usage], then the
// "hengshi" metadata chunk and [DONE]) — with the X-Hengshi-* headers. It is also the chain's
// StreamOut: the chain opens the stream at its commit point and sends the pieces after it.
//
// Ownership: borrows the exchange and the request for one response. Not thread-safe: one
// request's strand.
#pragma once

#include <optional>
#include <string>

#include "chain/attempt.h"
#include "chain/chain.h"
#include "core/api_error.h"
#include "core/chat_request.h"
#include "core/response_meta.h"
#include "server/http_exchange.h"

namespace hengshi::server {

class ResponseWriter : public chain::StreamOut {
 public:
  ResponseWriter(HttpExchange& exchange, const ChatRequest& request, bool expose_figures)
      : exchange_(exchange), request_(request), expose_figures_(expose_figures) {}

  // A whole answer: the upstream's JSON (our metadata added to it in place) or one built from the
  // text; as SSE when the request streams. False when the client left.
  awaitable<bool> write_answer(const ResponseMeta& meta, chain::Answer& answer);
  // Ends a stream the chain opened and fed: the finish chunk (unless the source's own chunks
  // carried it), usage when asked for, the metadata chunk, [DONE].
  awaitable<bool> finish_stream(const ResponseMeta& meta, const chain::Answer& answer);
  // The error in OpenAI's shape (Retry-After on a 429/503 when known); once a stream is open,
  // an in-band error event and the end of the stream instead.
  awaitable<void> write_error(const ApiError& error, const ResponseMeta* meta,
                              std::optional<std::int64_t> retry_after_ms = std::nullopt);

  // chain::StreamOut
  awaitable<bool> open(const ResponseMeta& meta) override;
  awaitable<bool> send(const chain::Piece& piece, const ResponseMeta& meta) override;
  bool opened() const { return opened_; }

  // The metadata as the client sees it (figures only with server.expose_figures).
  nlohmann::json client_meta(const ResponseMeta& meta) const { return meta.to_json(expose_figures_); }
  std::string client_meta_text(const ResponseMeta& meta) const { return meta.to_json_text(expose_figures_); }

 private:
  // write_answer() for a request that streams: the whole answer as SSE events.
  awaitable<bool> write_answer_as_stream(const ResponseMeta& meta, chain::Answer& answer);
  awaitable<bool> send_role_once(const ResponseMeta& meta);
  awaitable<bool> write_event(const nlohmann::json& event);
  // Writes `events` (SSE text) after any held back, as one chunk.
  awaitable<bool> write_events(std::string_view events);

  HttpExchange& exchange_;
  const ChatRequest& request_;
  bool expose_figures_;
  bool opened_ = false;
  bool role_sent_ = false;
  std::string held_;  // upstream chunks held for the piece that follows at once (Piece::more)
};

// Seconds for a Retry-After header: at least 1, rounded up.
std::string retry_after_seconds(std::int64_t retry_after_ms);

}  // namespace hengshi::server
