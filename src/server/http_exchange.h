// HttpExchange: one request on a client connection and the ways to answer it — a whole
// response, or a chunked SSE stream. Handlers get one per request; it lives on the connection's
// strand and must not be used after the handler returns.
//
// Every write is bounded by the connection's write timeout: a client that stops reading fails
// the write, which fires client_gone() so the work behind the answer (upstream call, edge
// generation) is cancelled instead of holding its slot.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/api_error.h"
#include "core/asio.h"
#include "core/cancel_token.h"
#include "core/deadline.h"
#include "core/lazy_deadline.h"
#include "core/write_now.h"

namespace hengshi::server {

using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

// A response's status line and fields as Beast's serializer writes them, then `extra_lines`
// (whole "Name: value\r\n" lines), ending with the blank line (the body is written beside it).
std::string response_head(const http::response_header<>& response, std::string_view extra_lines = {});
// The head HttpExchange::send() writes for a response whose only fields are Content-Type (set
// first), the keep-alive and Server it adds, and the body's Content-Length: the same bytes,
// written without building Beast's fields (an allocation each).
std::string text_response_head(unsigned version, http::status status, std::string_view content_type,
                               std::size_t content_length, bool keep_alive, std::string_view extra_lines = {});

struct ClientKey;  // server/key_store.h
struct KeySet;     // server/key_store.h

// What a keep-alive connection remembers from one request to the next. Clients send the same
// key on every request of a connection: the key proved once against a key set is not hashed
// again while that set is the running one (a reload makes a new set, and the key is proved anew).
struct ConnectionMemo {
  std::string proved_secret;
  std::shared_ptr<const KeySet> proved_in;
  std::shared_ptr<const ClientKey> proved_key;
};

class HttpExchange {
 public:
  // `client_gone` is shared with the server's disconnect watcher (the token's state is owned by
  // both, so a late watcher never touches a finished exchange).
  HttpExchange(tcp::socket& stream, LazyDeadline& deadline, Request& request,
               Clock::time_point received_at, CancelToken client_gone, Millis write_timeout,
               ConnectionMemo& memo)
      : stream_(stream),
        deadline_(deadline),
        request_(request),
        received_at_(received_at),
        client_gone_(std::move(client_gone)),
        write_timeout_(write_timeout),
        memo_(memo) {}

  const Request& request() const { return request_; }
  Clock::time_point received_at() const { return received_at_; }
  // When the handler logged the request as done, if it did: the end its metrics share.
  std::optional<Clock::time_point> finished_at() const { return finished_at_; }
  void set_finished_at(Clock::time_point at) { finished_at_ = at; }
  // Fired when the client disconnects, or stops reading, while the request is being handled —
  // a disconnect is noticed once the handler called watch_client().
  CancelToken& client_gone() { return client_gone_; }
  // Before the handler waits on anything slow (an upstream, the edge LLM): watch the client's
  // socket, so a client that leaves cancels the work. Idempotent; cheap answers never call it.
  void watch_client() {
    if (watch_client_) watch_client_();
  }
  // `arm` starts the watch; `disarm` ends it when the last bytes of the answer go out, so the
  // client's next request finds no watch to complete (which would cost a syscall per request).
  void on_watch_client(std::function<void()> arm, std::function<void()> disarm) {
    watch_client_ = std::move(arm);
    unwatch_client_ = std::move(disarm);
  }

  // Sends a complete response (keep-alive and Content-Length are filled in), with
  // `extra_head_lines` (whole "Name: value\r\n" lines the gateway wrote itself) after its fields.
  // False when the client is gone.
  awaitable<bool> send(Response response, std::string extra_head_lines = {});
  // The same for a body with a Content-Type and no other field (an answer): the head is written
  // as text, no Beast message is built.
  awaitable<bool> send_text(http::status status, std::string_view content_type, std::string body,
                            std::string extra_head_lines = {});
  awaitable<bool> send_json(http::status status, std::string body);

  // Starts a chunked text/event-stream response with the given extra headers already set on
  // `head`; then write_chunk() per event and finish_stream() once.
  awaitable<bool> start_stream(http::response<http::empty_body> head);
  awaitable<bool> write_chunk(std::string_view data);
  // `last_events`: SSE text that goes out with the terminating chunk, in the same write.
  awaitable<bool> finish_stream(std::string_view last_events = {});

  // Reports `error` the only way still open: the whole error response when nothing was sent,
  // an SSE error event and the end of the stream when a stream had started, nothing after the
  // stream ended. The connection is closed afterwards either way.
  awaitable<void> fail(const ApiError& error);

  bool response_started() const { return response_started_; }
  bool streaming() const { return streaming_; }
  int status() const { return status_; }
  bool keep_alive() const { return keep_alive_; }
  void force_close() { keep_alive_ = false; }
  // Admitted over server.max_in_flight, into the edge priority reserve: only an answer that needs
  // no cloud call may be given; the handler sheds anything else.
  void set_under_pressure(bool value) { under_pressure_ = value; }
  bool under_pressure() const { return under_pressure_; }
  std::size_t bytes_sent() const { return bytes_sent_; }
  // The client's address, "unknown" when the socket cannot tell (it went away).
  std::string peer_address() const {
    beast::error_code ec;
    const auto peer = stream_.remote_endpoint(ec);
    return ec ? std::string("unknown") : peer.address().to_string();
  }

  // The client key that authenticated this request (set by GatewayHandler); null when auth is off.
  const std::shared_ptr<const ClientKey>& client_key() const { return client_key_; }
  ConnectionMemo& connection_memo() { return memo_; }
  void set_client_key(std::shared_ptr<const ClientKey> key) { client_key_ = std::move(key); }

 private:
  // The response's status is `status`; it keeps the connection only if the request allows.
  void begin_response(int status);
  // A whole response: its head and body in one gather write, after which the client watch ends.
  // The strings are the coroutine's own (send() and send_text() are plain functions returning it).
  awaitable<bool> write_whole(std::string head, std::string body);
  // Every write goes out with write_now() first; only what the socket did not take at once is
  // awaited, under the write timeout (a client that stops reading cannot hold the connection).
  template <class ConstBufferSequence>
  awaitable<std::size_t> write_rest_in_time(const ConstBufferSequence& buffers, std::size_t sent,
                                            beast::error_code& ec) {
    deadline_.expires_after(write_timeout_);
    return write_rest(stream_, buffers, sent, ec);
  }
  void unwatch_client() {
    if (unwatch_client_) unwatch_client_();
  }
  // Counts the bytes, ends the write timeout, and records a failed write as the client leaving.
  bool after_write(std::size_t sent, const beast::error_code& ec);

  tcp::socket& stream_;
  LazyDeadline& deadline_;
  Request& request_;
  Clock::time_point received_at_;
  std::optional<Clock::time_point> finished_at_;
  CancelToken client_gone_;
  Millis write_timeout_;
  bool response_started_ = false;
  bool streaming_ = false;
  bool stream_finished_ = false;
  bool keep_alive_ = true;
  int status_ = 0;
  bool under_pressure_ = false;
  std::size_t bytes_sent_ = 0;
  std::shared_ptr<const ClientKey> client_key_;
  ConnectionMemo& memo_;
  std::function<void()> watch_client_;
  std::function<void()> unwatch_client_;
};

}  // namespace hengshi::server
