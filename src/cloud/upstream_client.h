// UpstreamClient: one OpenAI-compatible endpoint (one pool member). Keeps a pool of keep-alive
// connections (HTTP or HTTPS), sends chat-completion requests, and passes streams through
// chunk by chunk. Every wait is bounded by the member's timeouts and the request's deadline;
// cancelling the CancelToken closes the socket so the upstream stops work at once.
//
// Thread-safety: complete()/stream() may be called concurrently from any executor; the idle
// connection list is guarded by a mutex. The client must outlive every call on it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cloud/cloud_metrics.h"
#include "cloud/forward_body.h"
#include "cloud/reply_body.h"
#include "cloud/response_budget.h"
#include "cloud/upstream_error.h"
#include "core/asio.h"
#include "core/cancel_token.h"
#include "core/config.h"
#include "core/deadline.h"
#include "core/result.h"
#include "core/url.h"

namespace boost::asio::ssl {
class context;
}

namespace hengshi::cloud {

struct UpstreamReply {
  ReplyBody body;        // the upstream's JSON response: its bytes and the fields read from them
  std::string upstream;  // member name
  std::string model;     // model the member was asked for
  Usage usage;
  std::chrono::microseconds latency{0};
  Clock::time_point settled_at{};  // when the exchange ended: a reading later steps can share
};

struct StreamSummary {
  std::string upstream;
  std::string model;
  Usage usage;  // from the upstream's usage chunk when it sent one
  std::int64_t chunks = 0;
  std::chrono::microseconds ttft{0};
  std::chrono::microseconds latency{0};
};

// Receives the data payload of each SSE event (the JSON text of one chat.completion.chunk;
// "[DONE]" is not passed). Returns false to stop: the upstream request is then abandoned.
// `more`: another chunk arrived with this one and follows at once, with no wait on the network,
// so a writer may hold this one and send both in one write (a syscall per burst, not per chunk).
using ChunkSink = std::function<awaitable<bool>(std::string_view chunk_json, bool more)>;

// The API key named by member.api_key_env, trimmed: "" when the member names no variable; an
// error naming the pool, the member and the variable (never its value) when it is unset, empty
// or not usable in a header.
Result<std::string> read_api_key(const UpstreamConfig& member, const std::string& pool);

// Owns its pooled connections; their sockets use the executors of the calls that opened them,
// so the client must be destroyed before the io_context those calls ran on.
class UpstreamClient {
 public:
  // `url` is config.base_url parsed. `tls` is the client TLS context for an https member
  // (make_member_tls_context(); created with system CAs when null); unused for http.
  // `pool` labels the metrics and log lines. `budget` (shared by every client of the process;
  // null = no global cap) bounds the response bytes all calls hold at once.
  UpstreamClient(UpstreamConfig config, Url url, std::shared_ptr<boost::asio::ssl::context> tls,
                 std::string pool = {}, std::shared_ptr<ResponseBudget> budget = nullptr);
  ~UpstreamClient();
  UpstreamClient(const UpstreamClient&) = delete;
  UpstreamClient& operator=(const UpstreamClient&) = delete;

  const UpstreamConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }

  // Non-streaming call. `request` is the caller's body; "model" is replaced with the member's
  // model and "stream" forced false (a caller's stream_options is dropped with it).
  // Must be awaited on the executor (strand) that owns `cancel`; `request` must outlive the call.
  awaitable<Result<UpstreamReply, UpstreamError>> complete(const ForwardBody& request,
                                                           Deadline deadline, CancelToken cancel);
  // The same, filling `reply` (a default one; left as it was on failure): the hot path's form,
  // where the reply is built once in the caller's frame instead of moved out level by level.
  awaitable<std::optional<UpstreamError>> complete_into(const ForwardBody& request, Deadline deadline,
                                                        CancelToken cancel, UpstreamReply& reply);

  // Streaming call: "stream" forced true and stream_options.include_usage forced on so the
  // summary can count tokens; the usage-only chunk reaches `sink` only when the caller asked
  // for it. Every chunk goes to `sink` as it arrives. If `sink` returns false the connection is
  // closed and the call ends with UpstreamErrorKind::cancelled.
  awaitable<Result<StreamSummary, UpstreamError>> stream(const ForwardBody& request,
                                                         Deadline deadline, CancelToken cancel,
                                                         ChunkSink sink);

  // Offline-mode probe (src/chain/cloud_probe.h): GET <base_url>/models with the member's
  // Authorization header on a fresh connection that is closed afterwards (never pooled), bounded
  // by `deadline`, connect_timeout_ms and ttft_timeout_ms. True when any HTTP response with a
  // status below 500 arrives (a 401 still proves the cloud is reachable). Records no outcome
  // or latency metrics. Must be awaited on one strand; never throws.
  awaitable<bool> probe(Deadline deadline);

  // Load-balancing signals.
  int outstanding() const { return outstanding_.load(std::memory_order_relaxed); }
  // Exponentially weighted moving average (alpha 0.2) of successful call latency, µs (0 until
  // the first): the whole exchange for complete(), the first chunk for stream() — in both cases
  // the time until the client can start receiving.
  double latency_ewma_us() const { return latency_ewma_us_.load(std::memory_order_relaxed); }
  // The EWMA as the balancer scores it at `now`: it fades (time constant kLatencyMemory) while
  // the member gets no calls, so a member penalised for failures is tried again after a while
  // instead of being starved for good once it has recovered.
  static constexpr std::chrono::seconds kLatencyMemory{10};
  double latency_score_us(std::chrono::steady_clock::time_point now) const;
  // Feeds one sample into latency_ewma_us() from outside a call: the pool's penalty for a
  // failed call, so a member that fails fast stops looking fast.
  void add_latency_sample(std::chrono::microseconds sample) { record_latency(sample); }

  // Idle keep-alive connections (for tests and /admin/stats).
  std::size_t idle_connections();
  // Shutdown, once no request is in flight: closes the idle connections, and any released later
  // (no connection is pooled after this). An idle connection may hold a pending wait on its call
  // timer (reuse_call_timers), which would keep the io_context from running out of work.
  void close_idle();

  // Only when every call on this client runs on one thread (a gateway with one I/O thread): a
  // call's time limit then lives on its connection and is moved, not made, by the next call on
  // it. A limit per call arms a timer at its start and cancels it at its end, and the cancelled
  // wait runs through the scheduler: about 3% of the CPU per proxied request at 64 connections.
  // Off (one limit per call) by default: with several threads a pooled connection is used, and
  // dropped, from calls on other strands than the one its timer runs on.
  void reuse_call_timers(bool on) { reuse_call_timers_ = on; }

 private:
  struct Connection;
  friend class UpstreamCall;  // one call's exchange (upstream_client.cc)

  std::unique_ptr<Connection> take_idle();
  // `now`: when the exchange ended (the caller has read the clock already).
  void release(std::unique_ptr<Connection> connection, std::chrono::steady_clock::time_point now);
  void record_latency(std::chrono::microseconds latency,
                      std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now());

  UpstreamConfig config_;
  std::string pool_;
  std::shared_ptr<ResponseBudget> budget_;
  Url url_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  // Request line and fixed headers up to "Content-Length: ". Holds the Authorization header,
  // so it is never logged or copied into an error.
  std::string request_head_;
  std::string probe_head_;  // the whole GET /models request; holds Authorization too
  unsigned short port_ = 0;
  boost::asio::ip::address host_ip_;  // when the host is an IP literal: no DNS, no SNI
  bool host_is_ip_ = false;
  UpstreamMetrics metrics_;

  std::mutex idle_mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  bool idle_closed_ = false;  // close_idle() ran: released connections are closed, not pooled
  std::atomic<int> outstanding_{0};
  bool reuse_call_timers_ = false;
  std::atomic<double> latency_ewma_us_{0.0};
  std::atomic<std::int64_t> last_latency_sample_ns_{0};  // steady clock; 0 = none yet
};

}  // namespace hengshi::cloud
