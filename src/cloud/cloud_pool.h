// CloudPool: the members of one pool (cloud-small or cloud-large) and the choice among them.
// The choice is power-of-two-choices on (latency EWMA × (outstanding + 1)) by default, or least
// outstanding requests; members at max_concurrent, members whose circuit breaker refuses a call
// and (while another is eligible) members the caller asked to avoid are skipped. A failed call
// feeds its member's latency EWMA a penalty, so a member that fails fast stops attracting
// traffic; the score fades while the member gets no calls, so it is tried again later rather
// than starved for good. A pool bulkhead bounds the calls in flight and queues the excess (bulkhead.h).
// One call = one member, no retry: retries and fallbacks belong to the degradation chain
// (src/chain/).
//
// Panic (Envoy's healthy-panic threshold): when fewer than chain.breaker.panic_threshold of the
// members allow calls, the choice is made among all members as if none were open — a pool never
// refuses because its members look bad, so a flaky pool still answers and only offline mode
// (connect failures) skips the cloud outright. A call that reaches an open member this way is
// marked (UpstreamError::member_open) so the chain makes it a single attempt: a hopeless pool
// costs at most one call per request. Panic is counted (hengshi_breaker_panic_total), the share
// of members open is a gauge (cloud_metrics.h), and its start and end are logged.
//
// Thread-safety: all methods may be called concurrently. The pool owns its members, their
// breakers and its bulkhead; it must outlive every call on it.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "cloud/bulkhead.h"
#include "cloud/circuit_breaker.h"
#include "cloud/cloud_metrics.h"
#include "cloud/upstream_client.h"
#include "core/chain_config.h"
#include "obs/metrics.h"
#include "core/config.h"
#include "core/result.h"

namespace hengshi::cloud {

// Chooses a member index, or -1 when no member is eligible (full or unavailable). Pure function
// of the members' signals and the random source, so it is unit-testable without sockets.
struct MemberSignal {
  int outstanding = 0;
  int max_concurrent = 1;
  double latency_ewma_us = 0.0;
  bool available = true;  // its circuit breaker allows a call now (or the pool is in panic)
  bool avoided = false;   // chosen only when no eligible member that is not avoided exists
};
int pick_member(const std::vector<MemberSignal>& members, const std::string& balancer,
                std::mt19937_64& rng);

// Per-call preferences of the caller (the chain).
struct CallOptions {
  // Member names not to choose while another eligible member exists: the chain's retry
  // prefers a member other than the one that just failed.
  std::vector<std::string> avoid;
  // Streams: called once the member is chosen, before the call starts, with whether its recent
  // streams broke midway (CircuitBreaker::stream_flaky): the chain's commit point reads it.
  std::function<void(bool stream_flaky)> on_chosen;
};

class CloudPool {
 public:
  // Fails, naming the pool and the member, when a member has no name, its base_url does not
  // parse, its ca_file cannot be loaded, or its api_key_env is unset or empty (never a silent
  // unauthenticated call). Logs a warning for each member with tls_verify: false. `tls` is
  // shared by the https members that need no context of their own (make_client_tls_context()
  // when null). `budget` is the process-wide response budget (config.cloud), shared by every
  // pool; null = none. `chain` gives the breaker settings (chain.breaker, one breaker per
  // member) and the pool's bulkhead (chain.bulkhead_for(config.name)).
  static Result<std::unique_ptr<CloudPool>> create(
      const PoolConfig& config, std::shared_ptr<boost::asio::ssl::context> tls,
      std::shared_ptr<ResponseBudget> budget = nullptr, const ChainConfig& chain = {});

  const std::string& name() const { return config_.name; }
  const PoolConfig& config() const { return config_; }
  const std::vector<std::unique_ptr<UpstreamClient>>& members() const { return members_; }

  // The member i's breaker (same order as members()).
  CircuitBreaker& breaker(std::size_t member) { return *breakers_[member]; }
  Bulkhead& bulkhead() { return *bulkhead_; }
  // Whether the pool is in panic now: fewer than panic_threshold of its members allow calls.
  bool in_panic(Clock::time_point now = Clock::now());

  // One call to one member, as UpstreamClient::complete()/stream() (same rules for `request`,
  // `cancel` and `sink`), after the pool's bulkhead admitted it (UpstreamErrorKind::overloaded
  // or cancelled when it did not). Fails with total_timeout (no member called, nothing
  // recorded) when the deadline passed in the bulkhead's queue, and with overloaded when every
  // member is at max_concurrent. The outcome is recorded on the member's breaker; for streams a
  // failure after the first chunk counts too (and is remembered as a broken stream). `options`
  // is taken by value: it lives in the call's frame.
  awaitable<Result<UpstreamReply, UpstreamError>> complete(const ForwardBody& request,
                                                           Deadline deadline, CancelToken cancel,
                                                           CallOptions options = {});
  // complete() filling `reply` (a default one; left as it was on failure), as
  // UpstreamClient::complete_into().
  awaitable<std::optional<UpstreamError>> complete_into(const ForwardBody& request, Deadline deadline,
                                                        CancelToken cancel, CallOptions options,
                                                        UpstreamReply& reply);
  awaitable<Result<StreamSummary, UpstreamError>> stream(const ForwardBody& request,
                                                         Deadline deadline, CancelToken cancel,
                                                         ChunkSink sink, CallOptions options = {});

 private:
  class Attempt;  // one admitted call's breaker bookkeeping (cloud_pool.cc)
  struct Choice {
    int index = -1;  // member, or -1 with `error` set
    Admission admission;
    std::optional<UpstreamError> error;
  };

  // A call's admission: a bulkhead permit and an admitted member (held for the whole call).
  struct Lease {
    Bulkhead::Permit permit;
    std::size_t member = 0;
    Admission admission;
  };

  explicit CloudPool(PoolConfig config) : config_(std::move(config)) {}
  // Every call's way in: the all-open check, the bulkhead, the deadline, the member choice.
  // admit_now() when the bulkhead has room at once (no coroutine frame; nullopt otherwise), else
  // admit(), which may wait in the bulkhead's queue.
  std::optional<Result<Lease, UpstreamError>> admit_now(Deadline deadline, const CancelToken& cancel,
                                                        const CallOptions& options);
  awaitable<Result<Lease, UpstreamError>> admit(Deadline deadline, CancelToken& cancel, const CallOptions& options);
  Result<Lease, UpstreamError> lease_for(Bulkhead::Permit permit, Deadline deadline, const CallOptions& options);
  Choice choose(const CallOptions& options, Clock::time_point now);
  // The members' breakers allowing calls now; updates the open-share gauge and the panic log.
  bool update_panic(Clock::time_point now, std::vector<MemberSignal>* signals);
  // The window totals of every member but `member` (for the breaker's outlier rule).
  WindowTotals peers_of(std::size_t member, Clock::time_point now);
  UpstreamError overloaded_error() const;
  UpstreamError deadline_passed_error() const;

  PoolConfig config_;
  std::vector<std::unique_ptr<UpstreamClient>> members_;
  std::vector<std::unique_ptr<CircuitBreaker>> breakers_;  // one per member, same order
  std::unique_ptr<Bulkhead> bulkhead_;
  std::mutex rng_mutex_;
  std::mt19937_64 rng_{0x9e3779b97f4a7c15ULL};
  PoolMetrics metrics_;
  double panic_threshold_ = 0.5;    // chain.breaker.panic_threshold
  std::atomic<bool> panic_{false};  // for logging the start and the end of a panic
};

}  // namespace hengshi::cloud
