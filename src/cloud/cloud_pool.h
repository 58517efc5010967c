// CloudPool: the members of one pool (cloud-small or cloud-large) and the choice among them.
// The choice is power-of-two-choices on (latency EWMA × (outstanding + 1)) by default, or least
// outstanding requests; members at max_concurrent are skipped. One call = one member, no retry:
// retries and fallbacks belong to the degradation chain (src/chain/).
//
// Thread-safety: all methods may be called concurrently. The pool owns its members.
#pragma once

#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "cloud/upstream_client.h"
#include "obs/metrics.h"
#include "core/config.h"
#include "core/result.h"

namespace hengshi::cloud {

// Chooses a member index, or -1 when every member is full. Pure function of the members'
// signals and the random source, so it is unit-testable without sockets.
struct MemberSignal {
  int outstanding = 0;
  int max_concurrent = 1;
  double latency_ewma_us = 0.0;
};
int pick_member(const std::vector<MemberSignal>& members, const std::string& balancer,
                std::mt19937_64& rng);

class CloudPool {
 public:
  // Fails, naming the pool and the member, when a member has no name, its base_url does not
  // parse, its ca_file cannot be loaded, or its api_key_env is unset or empty (never a silent
  // unauthenticated call). Logs a warning for each member with tls_verify: false. `tls` is
  // shared by the https members that need no context of their own (make_client_tls_context()
  // when null). `budget` is the process-wide response budget (config.cloud), shared by every
  // pool; null = none.
  static Result<std::unique_ptr<CloudPool>> create(
      const PoolConfig& config, std::shared_ptr<boost::asio::ssl::context> tls,
      std::shared_ptr<ResponseBudget> budget = nullptr);

  const std::string& name() const { return config_.name; }
  const PoolConfig& config() const { return config_; }
  const std::vector<std::unique_ptr<UpstreamClient>>& members() const { return members_; }

  awaitable<Result<UpstreamReply, UpstreamError>> complete(const nlohmann::json& request,
                                                           Deadline deadline, CancelToken cancel);
  awaitable<Result<StreamSummary, UpstreamError>> stream(const nlohmann::json& request,
                                                         Deadline deadline, CancelToken cancel,
                                                         ChunkSink sink);

 private:
  explicit CloudPool(PoolConfig config) : config_(std::move(config)) {}
  UpstreamClient* choose();
  UpstreamError overloaded_error() const;

  PoolConfig config_;
  std::vector<std::unique_ptr<UpstreamClient>> members_;
  std::mutex rng_mutex_;
  std::mt19937_64 rng_{0x9e3779b97f4a7c15ULL};
  obs::Counter* overloaded_total_ = nullptr;  // calls refused because every member was full
};

}  // namespace hengshi::cloud
