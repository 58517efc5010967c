#include "cloud/upstream_client.h"

#include <algorithm>
#include <cmath>
#include <array>
#include <charconv>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <utility>

#include "core/asio.h"

#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include "cloud/sse_parser.h"
#include "cloud/tls_context.h"
#include "cloud/upstream_response_parser.h"
#include "core/json_text.h"
#include "core/lazy_deadline.h"
#include "core/parse_buffered.h"
#include "core/simple_http_head.h"
#include "core/write_now.h"
#include "core/yield_turn.h"

namespace hengshi::cloud {

using nlohmann::json;

namespace {

constexpr std::size_t kStreamReadBytes = 16 * 1024;    // one read of a stream body
constexpr std::size_t kErrorSnippetBytes = 200;        // of an upstream body, in messages
// After [DONE] the chunked terminator normally follows in the same or the next segment; wait
// this long for it so the connection can be reused, otherwise close it.
constexpr Millis kDrainGrace{100};
// A pooled connection idle for less than this is reused without a peek for EOF.
constexpr Millis kPeekAfterIdle{1000};

// The caller's body for the member: "model" replaced, "stream" forced, and for streams
// stream_options.include_usage forced on. The other members are the caller's bytes when the
// request's parse vouched for them (ForwardBody::members), else written from the DOM (no deep
// copy of the caller's messages). The gateway's "hengshi" object never goes upstream.
std::string upstream_body(const ForwardBody& forward, const std::string& model, bool stream) {
  std::string out;
  out.reserve(forward.members != nullptr ? forward.members->size() + 96 : 256);
  out += "{\"model\":";
  append_json_string(out, model);
  out += stream ? ",\"stream\":true" : ",\"stream\":false";
  if (forward.members != nullptr) {
    // The caller's own bytes: the request's parse found them to hold what the DOM holds.
    if (!forward.members->empty()) out.append(",").append(*forward.members);
  } else if (const json& request = forward.dom(); request.is_object()) {
    for (auto it = request.begin(); it != request.end(); ++it) {
      const std::string& key = it.key();
      // The same members the spliced text leaves out: both ways write one body.
      if (std::find(kMembersWrittenAgain.begin(), kMembersWrittenAgain.end(), key) != kMembersWrittenAgain.end()) {
        continue;
      }
      out += ',';
      append_json_string(out, key);
      out += ':';
      append_dump_text(out, it.value());
    }
  }
  if (stream) {
    // OpenAI rejects stream_options on non-streams: written only here, the caller's merged in.
    out += ",\"stream_options\":";
    const json* options = nullptr;
    if (forward.has_stream_options()) {  // asked first: the DOM is built only for this
      const json& request = forward.dom();
      if (auto it = request.find("stream_options"); it != request.end() && it->is_object()) options = &*it;
    }
    if (options != nullptr) {
      json merged = *options;
      merged["include_usage"] = true;
      append_dump_text(out, merged);
    } else {
      out += "{\"include_usage\":true}";
    }
  }
  out += '}';
  return out;
}

// Cheap pre-check: only chunks with a "usage" object (not "usage":null) need their usage read.
// glibc's memmem, not string_view::find: find stops at every '"' (a memchr and a compare
// each), and a chunk is mostly quotes.
bool mentions_usage_object(std::string_view chunk) {
  constexpr std::string_view kKey = "\"usage\"";
  std::string_view rest = chunk;
  while (const void* hit = ::memmem(rest.data(), rest.size(), kKey.data(), kKey.size())) {
    const auto at = static_cast<std::size_t>(static_cast<const char*>(hit) - rest.data());
    std::size_t i = at + kKey.size();
    while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t' || rest[i] == '\n' || rest[i] == '\r' ||
                               rest[i] == ':')) {
      ++i;
    }
    if (i < rest.size() && rest[i] == '{') return true;
    rest.remove_prefix(at + 1);
  }
  return false;
}

// Retry-After in seconds (the HTTP-date form is ignored).
std::optional<std::int64_t> retry_after_ms(std::string_view value) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  double seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (ec != std::errc() || end == value.data() || seconds < 0) return std::nullopt;
  return static_cast<std::int64_t>(seconds * 1000.0);
}

// Upstream text in a message: cut on a character boundary, invalid UTF-8 replaced.
std::string snippet(std::string_view body) { return utf8_snippet(body, kErrorSnippetBytes); }

std::string trim(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  return std::string(text);
}

}  // namespace

// One pooled connection: the stream plus the buffers a call reuses.
struct UpstreamClient::Connection {
  Connection(const asio::any_io_executor& executor, asio::ssl::context* tls) {
    if (tls != nullptr) {
      secure.emplace(executor, *tls);
    } else {
      plain.emplace(executor);
    }
    // Beast reads into this buffer at most its free capacity (512 bytes while it is small): a
    // reply or a burst of stream events would take a recv per 512 bytes, one event each.
    buffer.reserve(kStreamReadBytes);
  }
  tcp::socket& lowest() { return secure ? beast::get_lowest_layer(*secure) : *plain; }
  void close() {
    beast::error_code ec;
    lowest().close(ec);
  }

  // Plain sockets, not beast::tcp_stream: the call's time limits are one LazyDeadline per call
  // (UpstreamCall::arm), not a timer armed and cancelled around every read and write.
  std::optional<tcp::socket> plain;
  std::optional<beast::ssl_stream<tcp::socket>> secure;
  beast::flat_buffer buffer;           // bytes read from the socket, not yet parsed
  std::string head;                    // request head being sent
  std::unique_ptr<char[]> read_chunk;  // stream body bytes, allocated on first stream
  SseParser sse;
  bool reused = false;    // came from the idle list (the server may have closed it since)
  bool reusable = false;  // the last exchange left it clean: goes back to the idle list
  std::chrono::steady_clock::time_point idle_since;  // when it went back to the idle list
  // With reuse_call_timers: the limit of the call using it (UpstreamCall::arm), kept across
  // calls so a call only moves it; none while idle. Last: destroyed first, so it never closes a
  // socket that is already gone.
  std::unique_ptr<LazyDeadline> limit;
};

// The state of one complete()/stream() call: admission, the time limits, cancellation, the
// exchange itself and the bookkeeping at the end. Lives in the calling coroutine's frame.
class UpstreamCall {
 public:
  using Connection = UpstreamClient::Connection;

  UpstreamCall(UpstreamClient& client, asio::any_io_executor executor, Deadline deadline,
               CancelToken& cancel)
      : client_(client),
        executor_(std::move(executor)),
        cancel_(cancel),
        reservation_(client.budget_.get()),
        start_(Clock::now()) {
    const auto& config = client.config_;
    admitted_ = client.outstanding_.fetch_add(1, std::memory_order_relaxed) <
                std::max(1, config.max_concurrent);
    if (!admitted_) {
      client.outstanding_.fetch_sub(1, std::memory_order_relaxed);
      return;
    }
    client.metrics_.call_started();
    total_at_ = std::min(deadline.at(), start_ + Millis(config.total_timeout_ms));
    ttft_at_ = start_ + Millis(config.ttft_timeout_ms);
    ttft_kind_ = UpstreamErrorKind::ttft_timeout;
    if (ttft_at_ >= total_at_) {  // the overall limit comes first: report that one
      ttft_at_ = total_at_;
      ttft_kind_ = UpstreamErrorKind::total_timeout;
    }
    registration_ = cancel_.on_cancel([this] { abort(); });
  }

  ~UpstreamCall() {
    if (!admitted_) return;
    client_.outstanding_.fetch_sub(1, std::memory_order_relaxed);
    client_.metrics_.call_ended();
  }

  UpstreamCall(const UpstreamCall&) = delete;
  UpstreamCall& operator=(const UpstreamCall&) = delete;

  // One buffered call, start to end: fills `reply` (left as it was on failure). The reply is
  // built once, in the caller's frame, not moved out through each coroutine level (eight
  // strings, twice a level). The call lives in this coroutine's own frame, so the client's
  // complete_into() adds no level of its own.
  static awaitable<std::optional<UpstreamError>> complete(UpstreamClient& client,
                                                          const ForwardBody& request,
                                                          Deadline deadline, CancelToken cancel,
                                                          UpstreamReply& reply) {
    auto executor = co_await asio::this_coro::executor;
    UpstreamCall call(client, std::move(executor), deadline, cancel);
    if (auto refused = call.refuse()) co_return call.finish(std::move(*refused));
    call.body_ = upstream_body(request, client.config_.model, /*stream=*/false);
    auto exchange = [&call, &reply](auto& stream, Connection& connection, bool& retry_fresh) {
      return call.exchange_json(stream, connection, retry_fresh, reply);
    };
    if (auto failed = co_await call.on_connection<std::optional<UpstreamError>>(exchange)) {
      co_return call.finish(std::move(*failed));
    }
    // The clock as settle() read it when the exchange ended: one reading for the idle list, the
    // latency and its score.
    reply.latency = call.elapsed(call.settled_at_);
    reply.settled_at = call.settled_at_;
    client.record_latency(reply.latency, call.settled_at_);
    client.metrics_.succeeded(reply.latency);
    co_return std::nullopt;
  }

  awaitable<Result<StreamSummary, UpstreamError>> stream(const ForwardBody& request, ChunkSink& sink) {
    if (auto refused = refuse()) co_return finish(std::move(*refused));
    body_ = upstream_body(request, client_.config_.model, /*stream=*/true);
    caller_wants_usage_ = request.caller_wants_usage();
    auto exchange = [this, &sink](auto& stream, Connection& connection, bool& retry_fresh) {
      return exchange_sse(stream, connection, sink, retry_fresh);
    };
    auto result = co_await on_connection<Result<StreamSummary, UpstreamError>>(exchange);
    if (!result) co_return finish(result.error());
    StreamSummary& summary = result.value();
    summary.latency = elapsed();
    client_.record_latency(summary.ttft);
    client_.metrics_.first_chunk(summary.ttft);
    client_.metrics_.succeeded(summary.latency);
    co_return std::move(summary);
  }

  // GET /models on a fresh connection, closed afterwards: a probe must see the network as it is
  // now, not a pooled connection from before an outage. No outcome metrics: not a client call.
  awaitable<bool> probe() {
    if (refuse()) co_return false;
    auto acquired = co_await connect();
    if (!acquired) co_return false;
    std::unique_ptr<Connection> connection = std::move(acquired).value();
    bool answered = false;
    if (connection->secure) {
      answered = co_await probe_exchange(*connection->secure, *connection);
    } else {
      answered = co_await probe_exchange(*connection->plain, *connection);
    }
    active_ = nullptr;
    co_return answered;
  }

 private:
  template <class Stream>
  awaitable<bool> probe_exchange(Stream& stream, Connection& connection) {
    beast::error_code ec;
    arm(ttft_at_, ttft_kind_);
    co_await asio::async_write(stream, asio::buffer(client_.probe_head_),
                               asio::redirect_error(use_awaitable, ec));
    if (ec) co_return false;
    http::response_parser<http::empty_body> parser;
    co_await http::async_read_header(stream, connection.buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
    if (ec) co_return false;
    co_return parser.get().result_int() < 500;
  }

  // Runs `exchange` (a callable returning the exchange coroutine for a TLS or a plain stream) on a
  // pooled connection, and once more on a fresh one when a reused connection turned out stale
  // before any byte was sent.
  template <typename Outcome, typename Exchange>
  awaitable<Outcome> on_connection(Exchange exchange) {
    for (int attempt = 0;; ++attempt) {
      std::unique_ptr<Connection> connection = attempt == 0 ? take_pooled() : nullptr;
      if (!connection) {
        auto connected = co_await connect();
        if (!connected) co_return connected.error();
        connection = std::move(connected).value();
      }
      bool retry_fresh = false;
      // Not a conditional expression: g++ 12 mishandles temporaries of co_await inside ?:.
      std::optional<Outcome> result;
      if (connection->secure) {
        result.emplace(co_await exchange(*connection->secure, *connection, retry_fresh));
      } else {
        result.emplace(co_await exchange(*connection->plain, *connection, retry_fresh));
      }
      settle(std::move(connection));
      if (failed(*result) && retry_fresh && attempt == 0) continue;
      co_return std::move(*result);
    }
  }
  // An exchange's outcome: a Result, or the error of one that filled the caller's reply.
  template <typename Reply>
  static bool failed(const Result<Reply, UpstreamError>& outcome) { return !outcome; }
  static bool failed(const std::optional<UpstreamError>& outcome) { return outcome.has_value(); }

  // The call's time so far, or up to `now` when the caller has read the clock already.
  std::chrono::microseconds elapsed(Clock::time_point now = Clock::now()) const {
    return std::chrono::duration_cast<std::chrono::microseconds>(now - start_);
  }

  UpstreamError error(UpstreamErrorKind kind, std::string message) const {
    UpstreamError e;
    e.kind = kind;
    e.message = std::move(message);
    e.upstream = client_.config_.name;
    e.after_first_byte = after_first_byte_;
    return e;
  }

  UpstreamError finish(UpstreamError e) {
    client_.metrics_.failed(e.kind);
    return e;
  }

  std::optional<UpstreamError> refuse() const {
    if (!admitted_) {
      return error(UpstreamErrorKind::overloaded,
                   "max_concurrent (" + std::to_string(client_.config_.max_concurrent) +
                       ") calls already in flight");
    }
    if (cancel_.cancelled()) return error(UpstreamErrorKind::cancelled, "cancelled before sending");
    return std::nullopt;
  }

  // CancelToken callback: close whatever the call is waiting on; the pending operation then
  // fails and the failure is reported as cancelled.
  void abort() {
    aborted_ = true;
    if (resolver_ != nullptr) resolver_->cancel();
    if (active_ != nullptr) active_->close();
  }

  // Sets the limit for the next operations on the connection and what hitting it means. At the
  // limit the connection is closed (not marked aborted: io_failure() reports the limit).
  void arm(Clock::time_point at, UpstreamErrorKind kind) {
    limit_for_active().expires_at(at);
    expiry_at_ = at;
    expiry_kind_ = kind;
  }

  // The limit arm() moves: the active connection's own when the client reuses call timers (a
  // LazyDeadline whose pending wait is later than the new limit is not touched at all), else
  // this call's, made on first use.
  LazyDeadline& limit_for_active() {
    if (client_.reuse_call_timers_ && active_ != nullptr) {
      if (!active_->limit) {
        Connection* connection = active_;
        active_->limit = std::make_unique<LazyDeadline>(executor_, LazyDeadline::kNoPeriod,
                                                        [connection] { connection->close(); });
      }
      return *active_->limit;
    }
    if (!limit_) {
      limit_.emplace(executor_, LazyDeadline::kNoPeriod, [this] {
        if (active_ != nullptr) active_->close();
      });
    }
    return *limit_;
  }

  bool timed_out(const beast::error_code& ec) const {
    return ec == beast::error::timeout || Clock::now() >= expiry_at_;
  }

  // An I/O failure, classified: the client went away, a limit passed, or `otherwise`.
  UpstreamError io_failure(const beast::error_code& ec, UpstreamErrorKind otherwise,
                           const char* during) const {
    if (aborted_ || cancel_.cancelled()) return error(UpstreamErrorKind::cancelled, during);
    if (timed_out(ec)) return error(expiry_kind_, std::string("timed out ") + during);
    return error(otherwise, std::string(during) + ": " + ec.message());
  }

  // A read failure: malformed HTTP is a bad response, anything else a connection lost early.
  UpstreamError read_failure(const beast::error_code& ec, const char* during) const {
    bool malformed = ec.category() == http::make_error_code(http::error::bad_version).category() &&
                     ec != http::error::end_of_stream && ec != http::error::partial_message;
    return io_failure(
        ec, malformed ? UpstreamErrorKind::bad_response : UpstreamErrorKind::closed_early, during);
  }

  // A reused connection that fails before any response byte was probably closed by the server
  // while idle: the request can go again on a fresh connection, invisibly to the caller.
  bool stale(const Connection& connection, const beast::error_code& ec, bool got_some) const {
    return connection.reused && !got_some && connection.buffer.size() == 0 && !aborted_ &&
           !cancel_.cancelled() && !timed_out(ec);
  }

  UpstreamError status_error(unsigned status, const http::fields& headers, std::string body) {
    if (status == 401 || status == 403) {
      // The gateway's own key was refused: the operator's problem, not the client's. The
      // upstream's words go to the log only (they may quote the key's prefix).
      spdlog::error("upstream auth failed: pool '{}' member '{}' HTTP {}: {}", client_.pool_,
                    client_.config_.name, status, snippet(body));
      UpstreamError e = error(UpstreamErrorKind::auth_failed, "HTTP " + std::to_string(status));
      e.http_status = static_cast<int>(status);
      return e;
    }
    UpstreamErrorKind kind = UpstreamErrorKind::bad_response;
    if (status == 429) {
      kind = UpstreamErrorKind::rate_limited;
    } else if (status >= 500 && status < 600) {
      kind = UpstreamErrorKind::server_error;
    } else if (status >= 400 && status < 500) {
      kind = UpstreamErrorKind::client_error;
    }
    std::string message = "HTTP " + std::to_string(status);
    if (!body.empty()) message += ": " + snippet(body);
    UpstreamError e = error(kind, std::move(message));
    e.http_status = static_cast<int>(status);
    e.upstream_body = std::move(body);
    if (status == 429 || status == 503) {
      auto it = headers.find(http::field::retry_after);
      if (it != headers.end()) {
        e.retry_after_ms = retry_after_ms(std::string_view(it->value().data(), it->value().size()));
      }
    }
    return e;
  }

  std::uint64_t max_response_bytes() const {
    return static_cast<std::uint64_t>(client_.config_.max_response_bytes);
  }

  UpstreamError too_large() const {
    return error(UpstreamErrorKind::bad_response,
                 "response body is larger than max_response_bytes (" +
                     std::to_string(max_response_bytes()) + " bytes)");
  }

  UpstreamError over_budget() const {
    const ResponseBudget& budget = *client_.budget_;
    return error(UpstreamErrorKind::overloaded,
                 "the gateway's in-flight response budget (cloud.max_in_flight_response_bytes = " +
                     std::to_string(budget.max_bytes()) + ") is spent");
  }

  // A buffered (string_body) response whose header was read may keep its body: at most
  // max_response_bytes, and the bytes it holds reserved from the global budget (all of a known
  // Content-Length up front, so an oversized answer fails before it is read).
  std::optional<UpstreamError> admit_body(const Connection& connection,
                                          http::response_parser<http::string_body>& parser) {
    // The header may have been read by a parser with another limit (stream error bodies).
    const auto length = parser.content_length();
    return admit_body(connection, length ? std::optional<std::uint64_t>(*length) : std::nullopt,
                      parser.get().body().size());
  }
  std::optional<UpstreamError> admit_body(const Connection& connection,
                                          std::optional<std::uint64_t> length, std::size_t body) {
    if ((length && *length > max_response_bytes()) || body > max_response_bytes()) return too_large();
    const std::uint64_t held = std::max<std::uint64_t>(length.value_or(0), body + connection.buffer.size());
    if (!reservation_.grow_to(static_cast<std::int64_t>(held))) return over_budget();
    return std::nullopt;
  }

  // Reads the rest of a buffered response whose header was read, within admit_body()'s bounds.
  template <class Stream>
  awaitable<std::optional<UpstreamError>> read_body(
      Stream& stream, Connection& connection, http::response_parser<http::string_body>& parser) {
    if (auto refused = admit_body(connection, parser)) co_return refused;
    while (!parser.is_done()) {
      beast::error_code ec;
      co_await http::async_read_some(stream, connection.buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
      const std::size_t held = parser.get().body().size() + connection.buffer.size();
      if (ec == http::error::body_limit || parser.get().body().size() > max_response_bytes()) {
        co_return too_large();
      }
      if (ec) co_return read_failure(ec, "reading the response");
      if (!reservation_.grow_to(static_cast<std::int64_t>(held))) co_return over_budget();
    }
    co_return std::nullopt;
  }

  void settle(std::unique_ptr<Connection> connection) {
    active_ = nullptr;
    if (connection->limit) connection->limit->expires_never();  // no limit while idle
    settled_at_ = Clock::now();
    if (connection->reusable && !aborted_ && connection->lowest().is_open()) {
      client_.release(std::move(connection), settled_at_);
    }
  }

  // A pooled connection that is still usable, or null (then connect()). Not a coroutine: the
  // usual case under load waits for nothing, and a coroutine level costs a frame per request.
  std::unique_ptr<Connection> take_pooled() {
    while (auto idle = client_.take_idle()) {
      // A connection idle for a moment is not peeked at (a syscall per request under load); a
      // server that closed it even so is caught by the stale-connection retry in on_connection.
      // start_, not the clock: the call began just now.
      const bool recently_used = start_ - idle->idle_since < kPeekAfterIdle;
      if (!recently_used && !still_open(*idle)) continue;  // dropped; try the next one
      idle->reused = true;
      idle->reusable = false;
      active_ = idle.get();
      return idle;
    }
    return nullptr;
  }

  awaitable<Result<std::unique_ptr<Connection>, UpstreamError>> connect() {
    auto executor = co_await asio::this_coro::executor;
    auto connection =
        std::make_unique<Connection>(executor, client_.url_.tls() ? client_.tls_.get() : nullptr);
    active_ = connection.get();
    Clock::time_point connect_at = Clock::now() + Millis(client_.config_.connect_timeout_ms);
    UpstreamErrorKind connect_kind = UpstreamErrorKind::connect_timeout;
    if (connect_at >= ttft_at_) {
      connect_at = ttft_at_;
      connect_kind = ttft_kind_;
    }
    arm(connect_at, connect_kind);
    const Url& url = client_.url_;
    beast::error_code ec;
    if (client_.host_is_ip_) {
      co_await connection->lowest().async_connect(tcp::endpoint(client_.host_ip_, client_.port_),
                                                  asio::redirect_error(use_awaitable, ec));
    } else {
      auto endpoints = co_await resolve(executor, connect_at, ec);
      if (ec) {
        co_return io_failure(ec, UpstreamErrorKind::connect_failed,
                             ("resolving " + url.host).c_str());
      }
      co_await asio::async_connect(connection->lowest(), endpoints,
                                   asio::redirect_error(use_awaitable, ec));
    }
    if (ec) {
      co_return io_failure(ec, UpstreamErrorKind::connect_failed,
                           ("connecting to " + url.host + ":" + url.port).c_str());
    }
    connection->lowest().set_option(tcp::no_delay(true), ec);
    if (connection->secure) {
      SSL* ssl = connection->secure->native_handle();
      if (!client_.host_is_ip_) SSL_set_tlsext_host_name(ssl, url.host.c_str());
      if (client_.config_.tls_verify) {
        X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
        int set = client_.host_is_ip_ ? X509_VERIFY_PARAM_set1_ip_asc(param, url.host.c_str())
                                      : X509_VERIFY_PARAM_set1_host(param, url.host.c_str(), 0);
        if (set != 1) {
          co_return error(UpstreamErrorKind::connect_failed,
                          "cannot verify certificates for host " + url.host);
        }
      }
      co_await connection->secure->async_handshake(asio::ssl::stream_base::client,
                                                   asio::redirect_error(use_awaitable, ec));
      if (ec) {
        co_return io_failure(ec, UpstreamErrorKind::connect_failed,
                             ("TLS handshake with " + url.host).c_str());
      }
    }
    co_return std::move(connection);
  }

  // One non-blocking peek: an idle connection the server has closed reads EOF. A closure that
  // races this check is still caught by the stale-connection retry.
  static bool still_open(Connection& connection) {
    auto& socket = connection.lowest();
    if (!socket.is_open()) return false;
    char byte = 0;
    ssize_t n = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return false;
    // Plain HTTP must be silent between responses; TLS may carry post-handshake messages.
    if (n > 0) return connection.secure.has_value();
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }

  // Asio's resolver has no timeout: a timer on the same executor cancels it at `limit`.
  awaitable<tcp::resolver::results_type> resolve(const asio::any_io_executor& executor,
                                                 Clock::time_point limit, beast::error_code& ec) {
    struct Resolving {
      explicit Resolving(const asio::any_io_executor& executor) : resolver(executor) {}
      tcp::resolver resolver;
      bool done = false;
    };
    auto resolving = std::make_shared<Resolving>(executor);
    asio::steady_timer timer(executor, limit);
    timer.async_wait([resolving](const beast::error_code& timer_ec) {
      if (!timer_ec && !resolving->done) resolving->resolver.cancel();
    });
    resolver_ = &resolving->resolver;
    auto results = co_await resolving->resolver.async_resolve(
        client_.url_.host, client_.url_.port, asio::redirect_error(use_awaitable, ec));
    resolving->done = true;
    resolver_ = nullptr;
    timer.cancel();
    co_return results;
  }

  // The request as one gather write: its head (with this body's Content-Length) and the body.
  std::array<asio::const_buffer, 2> request_buffers(Connection& connection) {
    std::string& head = connection.head;
    head.assign(client_.request_head_);
    std::array<char, 24> digits{};
    auto [end, _] = std::to_chars(digits.data(), digits.data() + digits.size(), body_.size());
    head.append(digits.data(), end);
    head += "\r\n\r\n";
    return {asio::buffer(head), asio::buffer(body_)};
  }

  // What a plain socket takes of the request at once (write_now); a TLS stream's writes are all
  // awaited (write_rest), as its records are encrypted in its own asynchronous operation.
  template <class Stream>
  static std::size_t send_now(Stream& stream, const std::array<asio::const_buffer, 2>& request,
                              beast::error_code& ec) {
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      return write_now(stream, request, ec);
    } else {
      ec = {};
      return 0;
    }
  }

  template <class Stream>
  awaitable<std::optional<UpstreamError>> exchange_json(Stream& stream, Connection& connection, bool& retry_fresh,
                                                        UpstreamReply& reply) {
    beast::error_code ec;
    arm(ttft_at_, ttft_kind_);
    const auto request = request_buffers(connection);
    co_await yield_turn();  // this write goes out with the other ready ones (core/yield_turn.h)
    const std::size_t sent = send_now(stream, request, ec);
    if (write_pending(request, sent, ec)) co_await write_rest(stream, request, sent, ec);
    if (ec) {
      retry_fresh = stale(connection, ec, false);
      co_return io_failure(ec, UpstreamErrorKind::closed_early, "sending the request");
    }
    // The first bytes are read here and parsed at once: a small reply comes whole with them, and
    // no Beast read is needed. What comes in pieces is read by Beast as before.
    if (connection.buffer.size() == 0) {
      co_await yield_turn();  // the reply cannot be here yet (core/yield_turn.h)
      const std::size_t n = co_await stream.async_read_some(connection.buffer.prepare(kStreamReadBytes),
                                                            asio::redirect_error(use_awaitable, ec));
      connection.buffer.commit(n);
      if (ec == asio::error::eof) ec = http::error::end_of_stream;  // closed before a byte, as Beast says
    }
    // The usual reply, a 2xx whose plain head and whole body came in, is read without Beast's
    // parser (core/simple_http_head.h); anything else goes to Beast, which accepts or refuses it.
    if (!ec) {
      if (auto simple = read_simple_reply(buffered_text(connection.buffer), max_response_bytes())) {
        std::string body;
        body.reserve(simple->body.size() + kJsonPadding);  // simdjson reads it in place
        body.assign(simple->body);
        connection.buffer.consume(simple->size);
        arm(total_at_, UpstreamErrorKind::total_timeout);
        if (auto refused = admit_body(connection, body.size(), body.size()))
          co_return std::move(*refused);
        connection.reusable = simple->keep_alive && connection.buffer.size() == 0;
        co_return take_reply(std::move(body), reply);
      }
    }
    UpstreamResponseParser<http::string_body> parser;
    parser.body_limit(max_response_bytes());
    if (!ec) parse_buffered(parser, connection.buffer, ec);
    if (!ec && !parser.is_header_done()) {
      co_await http::async_read_header(stream, connection.buffer, parser,
                                       asio::redirect_error(use_awaitable, ec));
    }
    if (ec == http::error::body_limit) co_return too_large();
    if (ec) {
      retry_fresh = stale(connection, ec, parser.got_some());
      co_return read_failure(ec, parser.is_header_done() ? "reading the response" : "waiting for the response");
    }
    arm(total_at_, UpstreamErrorKind::total_timeout);
    std::optional<UpstreamError> failed;
    if (parser.is_done()) {
      failed = admit_body(connection, parser);
    } else {
      failed = co_await read_body(stream, connection, parser);
    }
    if (failed) co_return std::move(*failed);
    connection.reusable = parser.keep_alive() && connection.buffer.size() == 0;

    auto& response = parser.get();
    unsigned status = response.result_int();
    if (status < 200 || status >= 300) {
      co_return status_error(status, response.base(), std::move(response.body()));
    }
    co_return take_reply(std::move(response.body()), reply);
  }

  // A 2xx reply's body, read as a chat completion into `reply`.
  std::optional<UpstreamError> take_reply(std::string&& body, UpstreamReply& reply) {
    if (auto refused = read_reply_body(std::move(body), reply.body)) {
      return error(UpstreamErrorKind::bad_response, "response is not a chat completion (" +
                                                        refused->message + "): " + snippet(body));
    }
    reply.usage = reply.body.usage;
    reply.upstream = client_.config_.name;
    reply.model = client_.config_.model;
    return std::nullopt;
  }

  template <class Stream>
  awaitable<Result<StreamSummary, UpstreamError>> exchange_sse(Stream& stream,
                                                               Connection& connection,
                                                               ChunkSink& sink, bool& retry_fresh) {
    beast::error_code ec;
    arm(ttft_at_, ttft_kind_);
    const auto request = request_buffers(connection);
    co_await yield_turn();  // this write goes out with the other ready ones (core/yield_turn.h)
    const std::size_t sent = send_now(stream, request, ec);
    if (write_pending(request, sent, ec)) co_await write_rest(stream, request, sent, ec);
    if (ec) {
      retry_fresh = stale(connection, ec, false);
      co_return io_failure(ec, UpstreamErrorKind::closed_early, "sending the request");
    }
    UpstreamResponseParser<http::buffer_body> parser;
    // A stream is bounded by total_timeout_ms instead. Not boost::none: Beast 1.74 compares a
    // Content-Length against an empty optional as "over the limit".
    parser.body_limit(std::numeric_limits<std::uint64_t>::max());
    co_await http::async_read_header(stream, connection.buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
    if (ec) {
      retry_fresh = stale(connection, ec, parser.got_some());
      co_return read_failure(ec, "waiting for the response");
    }

    unsigned status = parser.get().result_int();
    if (status < 200 || status >= 300) {
      // Read the error body whole; the parser takes over the header already read.
      http::response_parser<http::string_body> error_parser(
          std::move(static_cast<http::response_parser<http::buffer_body>&>(parser)));
      arm(total_at_, UpstreamErrorKind::total_timeout);
      auto failed = co_await read_body(stream, connection, error_parser);
      if (failed && failed->kind == UpstreamErrorKind::overloaded) co_return std::move(*failed);
      if (!failed) connection.reusable = error_parser.keep_alive() && connection.buffer.size() == 0;
      auto& response = error_parser.get();
      co_return status_error(status, response.base(),
                             failed ? std::string() : std::move(response.body()));
    }
    auto content_type = parser.get()[http::field::content_type];
    if (!beast::iequals(content_type.substr(0, 17), "text/event-stream")) {
      co_return error(
          UpstreamErrorKind::bad_response,
          "expected a text/event-stream response, got '" + std::string(content_type) + "'");
    }

    if (!connection.read_chunk) connection.read_chunk = std::make_unique<char[]>(kStreamReadBytes);
    if (!reservation_.grow_to(kStreamReadBytes)) co_return over_budget();
    SseParser& sse = connection.sse;
    sse.reset();
    const auto max_stream_bytes = static_cast<std::uint64_t>(client_.config_.max_stream_bytes);
    std::uint64_t streamed_bytes = 0;
    StreamSummary summary;
    summary.upstream = client_.config_.name;
    summary.model = client_.config_.model;
    bool first_event = true;
    bool done = false;
    std::vector<std::string> arrived;  // the events of one read to pass on (capacity reused)
    while (!done) {
      // Every complete event this read brought is checked first, so each one passed on knows
      // whether another follows it at once.
      arrived.clear();
      while (auto event = sse.next_event()) {
        if (*event == "[DONE]") {
          done = true;
          break;
        }
        if (first_event) {
          first_event = false;
          summary.ttft = elapsed();
          arm(total_at_, UpstreamErrorKind::total_timeout);
        }
        // Room for simdjson's padding from the start: is_valid_json() would grow it (a copy).
        std::string& chunk_text = arrived.emplace_back();
        chunk_text.reserve(event->size() + kJsonPadding);
        chunk_text.assign(*event);
        ChunkUsage chunk_usage;
        const bool mentions_usage = mentions_usage_object(chunk_text);
        if (!is_valid_json(chunk_text, mentions_usage ? &chunk_usage : nullptr)) {
          co_return error(UpstreamErrorKind::bad_response,
                          "stream chunk is not JSON: " + snippet(chunk_text));
        }
        if (mentions_usage) {
          if (chunk_usage.has_usage) summary.usage = chunk_usage.usage;
          // The caller did not ask for usage: it would not have had this chunk.
          if (chunk_usage.usage_only && !caller_wants_usage_) {
            arrived.pop_back();
            continue;
          }
        }
      }
      for (std::size_t k = 0; k < arrived.size(); ++k) {
        bool keep_going = co_await sink(arrived[k], /*more=*/k + 1 < arrived.size());
        ++summary.chunks;
        after_first_byte_ = true;
        if (!keep_going)
          co_return error(UpstreamErrorKind::cancelled, "the client stopped reading");
      }
      if (done) break;
      if (sse.failed()) co_return error(UpstreamErrorKind::bad_response, "stream: " + sse.error());
      if (parser.is_done()) {
        co_return error(UpstreamErrorKind::closed_early, "stream ended without [DONE]");
      }
      auto& body = parser.get().body();
      body.data = connection.read_chunk.get();
      body.size = kStreamReadBytes;
      co_await http::async_read_some(stream, connection.buffer, parser,
                                     asio::redirect_error(use_awaitable, ec));
      if (ec == http::error::need_buffer) ec = {};
      if (ec) co_return read_failure(ec, "reading the stream");
      std::size_t got = kStreamReadBytes - body.size;
      streamed_bytes += got;
      if (streamed_bytes > max_stream_bytes) {
        co_return error(UpstreamErrorKind::bad_response,
                        "stream is longer than max_stream_bytes (" +
                            std::to_string(max_stream_bytes) + " bytes)");
      }
      sse.append(std::string_view(connection.read_chunk.get(), got));
      auto held = static_cast<std::int64_t>(kStreamReadBytes + sse.buffered_bytes());
      if (!reservation_.grow_to(held)) co_return over_budget();
    }

    // Drain the rest of the body (the chunked terminator) so the connection can be reused.
    if (parser.keep_alive()) {
      auto drain_at = std::min(total_at_, Clock::now() + kDrainGrace);
      arm(drain_at, UpstreamErrorKind::total_timeout);
      while (!parser.is_done()) {
        auto& body = parser.get().body();
        body.data = connection.read_chunk.get();
        body.size = kStreamReadBytes;
        co_await http::async_read_some(stream, connection.buffer, parser,
                                       asio::redirect_error(use_awaitable, ec));
        if (ec == http::error::need_buffer) ec = {};
        if (ec) break;
      }
      connection.reusable = !ec && parser.is_done() && connection.buffer.size() == 0;
    }
    co_return summary;
  }

  UpstreamClient& client_;
  asio::any_io_executor executor_;  // the calling coroutine's: where limit_ fires
  std::optional<LazyDeadline> limit_;  // made on the first arm()
  CancelToken& cancel_;
  ResponseBudget::Reservation reservation_;  // response bytes this call holds
  CancelToken::Registration registration_;
  Clock::time_point start_;
  Clock::time_point settled_at_;  // when the last exchange ended (settle())
  Clock::time_point ttft_at_;
  Clock::time_point total_at_;
  UpstreamErrorKind ttft_kind_ = UpstreamErrorKind::ttft_timeout;
  Clock::time_point expiry_at_ = Clock::time_point::max();
  UpstreamErrorKind expiry_kind_ = UpstreamErrorKind::total_timeout;
  std::string body_;
  Connection* active_ = nullptr;       // connection in use, closed by abort()
  tcp::resolver* resolver_ = nullptr;  // resolver in use, cancelled by abort()
  bool admitted_ = false;
  bool aborted_ = false;
  bool after_first_byte_ = false;
  bool caller_wants_usage_ = false;
};

Result<std::string> read_api_key(const UpstreamConfig& member, const std::string& pool) {
  if (member.api_key_env.empty()) return std::string();
  const char* value = std::getenv(member.api_key_env.c_str());
  std::string key = trim(value != nullptr ? value : "");
  std::string where = "pool '" + pool + "' member '" + member.name + "': api_key_env " +
                      member.api_key_env;
  // Starting anyway would send every call unauthenticated: refused instead.
  if (value == nullptr) return Error{"config_invalid", where + " is not set"};
  if (key.empty()) return Error{"config_invalid", where + " is empty"};
  bool header_safe = std::none_of(key.begin(), key.end(), [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (!header_safe) {
    return Error{"config_invalid", where + " holds control characters (not usable in a header)"};
  }
  return key;
}

UpstreamClient::UpstreamClient(UpstreamConfig config, Url url,
                               std::shared_ptr<asio::ssl::context> tls, std::string pool,
                               std::shared_ptr<ResponseBudget> budget)
    : config_(std::move(config)),
      pool_(std::move(pool)),
      budget_(std::move(budget)),
      url_(std::move(url)),
      tls_(std::move(tls)),
      metrics_(pool_, config_.name) {
  if (url_.tls() && !tls_) {
    auto context = make_client_tls_context();
    if (context) tls_ = std::move(context).value();
  }
  std::from_chars(url_.port.data(), url_.port.data() + url_.port.size(), port_);
  beast::error_code ec;
  host_ip_ = asio::ip::make_address(url_.host, ec);
  host_is_ip_ = !ec;

  std::string host = host_ip_.is_v6() && host_is_ip_ ? "[" + url_.host + "]" : url_.host;
  bool default_port = url_.port == (url_.tls() ? "443" : "80");
  if (!default_port) host += ":" + url_.port;
  request_head_ = "POST " + url_.path + "/chat/completions HTTP/1.1\r\nHost: " + host +
                  "\r\nUser-Agent: hengshi\r\nContent-Type: application/json\r\n";
  // CloudPool::create() refuses a member whose key cannot be read; a client made directly (tests)
  // without one sends no Authorization header.
  auto key = read_api_key(config_, pool_);
  if (key && !key->empty()) request_head_ += "Authorization: Bearer " + *key + "\r\n";
  request_head_ += "Content-Length: ";
  probe_head_ = "GET " + url_.path + "/models HTTP/1.1\r\nHost: " + host +
                "\r\nUser-Agent: hengshi\r\nAccept: application/json\r\n";
  if (key && !key->empty()) probe_head_ += "Authorization: Bearer " + *key + "\r\n";
  probe_head_ += "Connection: close\r\n\r\n";
}

UpstreamClient::~UpstreamClient() = default;

awaitable<std::optional<UpstreamError>> UpstreamClient::complete_into(const ForwardBody& request, Deadline deadline,
                                                                       CancelToken cancel, UpstreamReply& reply) {
  return UpstreamCall::complete(*this, request, deadline, std::move(cancel), reply);
}

awaitable<Result<UpstreamReply, UpstreamError>> UpstreamClient::complete(const ForwardBody& request,
                                                                         Deadline deadline,
                                                                         CancelToken cancel) {
  UpstreamReply reply;
  if (auto failed = co_await complete_into(request, deadline, std::move(cancel), reply)) co_return std::move(*failed);
  co_return reply;
}

awaitable<Result<StreamSummary, UpstreamError>> UpstreamClient::stream(const ForwardBody& request,
                                                                       Deadline deadline,
                                                                       CancelToken cancel,
                                                                       ChunkSink sink) {
  auto executor = co_await asio::this_coro::executor;
  UpstreamCall call(*this, executor, deadline, cancel);
  co_return co_await call.stream(request, sink);
}

awaitable<bool> UpstreamClient::probe(Deadline deadline) {
  CancelToken cancel;  // nothing cancels a probe: the deadline bounds it
  auto executor = co_await asio::this_coro::executor;
  UpstreamCall call(*this, executor, deadline, cancel);
  co_return co_await call.probe();
}

std::size_t UpstreamClient::idle_connections() {
  std::lock_guard lock(idle_mutex_);
  return idle_.size();
}

void UpstreamClient::close_idle() {
  std::vector<std::unique_ptr<Connection>> closing;  // closed after the lock is released
  std::lock_guard lock(idle_mutex_);
  idle_closed_ = true;
  closing.swap(idle_);
}

std::unique_ptr<UpstreamClient::Connection> UpstreamClient::take_idle() {
  std::lock_guard lock(idle_mutex_);
  if (idle_.empty()) return nullptr;
  // Most recently used first: the least likely to have been closed by the server.
  auto connection = std::move(idle_.back());
  idle_.pop_back();
  return connection;
}

void UpstreamClient::release(std::unique_ptr<Connection> connection,
                             std::chrono::steady_clock::time_point now) {
  connection->reused = false;
  connection->idle_since = now;
  std::lock_guard lock(idle_mutex_);
  if (!idle_closed_ &&
      idle_.size() < static_cast<std::size_t>(std::max(1, config_.max_concurrent))) {
    idle_.push_back(std::move(connection));
    return;
  }
  // More idle connections than could ever be in use at once: this one is closed (after the
  // lock is released, by the unique_ptr going out of scope).
}

namespace {

// How much of a latency score remains after `age` without a sample.
double memory_left(std::int64_t last_sample_ns, std::chrono::steady_clock::time_point now) {
  if (last_sample_ns == 0) return 1.0;
  const double age_s = static_cast<double>(now.time_since_epoch().count() - last_sample_ns) / 1e9;
  if (age_s <= 0.0) return 1.0;
  return std::exp(-age_s / static_cast<double>(UpstreamClient::kLatencyMemory.count()));
}

}  // namespace

double UpstreamClient::latency_score_us(std::chrono::steady_clock::time_point now) const {
  return latency_ewma_us() * memory_left(last_latency_sample_ns_.load(std::memory_order_relaxed), now);
}

void UpstreamClient::record_latency(std::chrono::microseconds latency,
                                    std::chrono::steady_clock::time_point now) {
  constexpr double kAlpha = 0.2;
  const double faded = memory_left(last_latency_sample_ns_.load(std::memory_order_relaxed), now);
  double sample = static_cast<double>(latency.count());
  double current = latency_ewma_us_.load(std::memory_order_relaxed);
  double next = 0;
  do {
    // A score that faded while the member was idle blends from where it faded to.
    const double from = current * faded;
    next = current == 0.0 ? sample : from + kAlpha * (sample - from);
  } while (!latency_ewma_us_.compare_exchange_weak(current, next, std::memory_order_relaxed));
  last_latency_sample_ns_.store(now.time_since_epoch().count(), std::memory_order_relaxed);
}

}  // namespace hengshi::cloud
