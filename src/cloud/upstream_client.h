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

struct Usage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

struct UpstreamReply {
  nlohmann::json body;             // the upstream's JSON response, as parsed
  std::string upstream;            // member name
  std::string model;               // model the member was asked for
  Usage usage;
  std::chrono::microseconds latency{0};
};

struct StreamSummary {
  std::string upstream;
  std::string model;
  Usage usage;                     // from the upstream's usage chunk when it sent one
  std::int64_t chunks = 0;
  std::chrono::microseconds ttft{0};
  std::chrono::microseconds latency{0};
};

// Receives the data payload of each SSE event (the JSON text of one chat.completion.chunk;
// "[DONE]" is not passed). Returns false to stop: the upstream request is then abandoned.
using ChunkSink = std::function<awaitable<bool>(std::string_view chunk_json)>;

class UpstreamClient {
 public:
  UpstreamClient(UpstreamConfig config, Url url, std::shared_ptr<boost::asio::ssl::context> tls);
  ~UpstreamClient();
  UpstreamClient(const UpstreamClient&) = delete;
  UpstreamClient& operator=(const UpstreamClient&) = delete;

  const UpstreamConfig& config() const { return config_; }
  const std::string& name() const { return config_.name; }

  // Non-streaming call. `request` is the caller's body; "model" is replaced with the member's
  // model and "stream" forced false.
  awaitable<Result<UpstreamReply, UpstreamError>> complete(const nlohmann::json& request,
                                                           Deadline deadline, CancelToken cancel);

  // Streaming call: "stream" forced true; every chunk goes to `sink` as it arrives.
  awaitable<Result<StreamSummary, UpstreamError>> stream(const nlohmann::json& request,
                                                         Deadline deadline, CancelToken cancel,
                                                         ChunkSink sink);

  // Load-balancing signals.
  int outstanding() const { return outstanding_.load(std::memory_order_relaxed); }
  // Exponentially weighted moving average of successful call latency, µs (0 until the first).
  double latency_ewma_us() const { return latency_ewma_us_.load(std::memory_order_relaxed); }

 private:
  struct Connection;
  friend struct ConnectionLease;

  awaitable<Result<std::unique_ptr<Connection>, UpstreamError>> acquire(Deadline deadline,
                                                                        CancelToken& cancel);
  void release(std::unique_ptr<Connection> connection);
  void record_latency(std::chrono::microseconds latency);

  UpstreamConfig config_;
  Url url_;
  std::shared_ptr<boost::asio::ssl::context> tls_;
  std::string authorization_;  // "Bearer <key>" read once from api_key_env; never logged

  std::mutex idle_mutex_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::atomic<int> outstanding_{0};
  std::atomic<double> latency_ewma_us_{0.0};
};

}  // namespace hengshi::cloud
