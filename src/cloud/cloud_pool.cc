#include "cloud/cloud_pool.h"

#include <algorithm>
#include <utility>

#include <spdlog/spdlog.h>

#include "cloud/cloud_metrics.h"
#include "cloud/tls_context.h"

namespace hengshi::cloud {
namespace {

bool has_capacity(const MemberSignal& member) {
  return member.outstanding < std::max(1, member.max_concurrent);
}

bool eligible(const MemberSignal& member) { return member.available && has_capacity(member); }

// The `nth` member (0-based) among those `usable`.
template <typename Usable>
int nth_available(const std::vector<MemberSignal>& members, std::size_t nth, Usable usable) {
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (usable(members[i]) && nth-- == 0) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

int pick_member(const std::vector<MemberSignal>& members, const std::string& balancer,
                std::mt19937_64& rng) {
  // Avoided members are candidates only when every eligible member is avoided.
  bool any_preferred = std::any_of(members.begin(), members.end(), [](const MemberSignal& m) {
    return eligible(m) && !m.avoided;
  });
  auto usable = [any_preferred](const MemberSignal& member) {
    return eligible(member) && !(any_preferred && member.avoided);
  };
  std::size_t available = 0;
  double latency_sum = 0;
  std::size_t latency_known = 0;
  for (const auto& member : members) {
    if (!usable(member)) continue;
    ++available;
    if (member.latency_ewma_us > 0) {
      latency_sum += member.latency_ewma_us;
      ++latency_known;
    }
  }
  if (available == 0) return -1;
  if (available == 1) return nth_available(members, 0, usable);

  if (balancer == "least_outstanding") {
    int best = -1;
    std::size_t ties = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (!usable(members[i])) continue;
      if (best < 0 || members[i].outstanding < members[best].outstanding) {
        best = static_cast<int>(i);
        ties = 1;
      } else if (members[i].outstanding == members[best].outstanding) {
        // Reservoir sampling: each of the tied members ends up chosen with equal chance.
        if (std::uniform_int_distribution<std::size_t>(0, ties++)(rng) == 0) {
          best = static_cast<int>(i);
        }
      }
    }
    return best;
  }

  // p2c: two distinct random candidates, the lower latency × load wins. A member without a
  // latency yet gets the mean of the others (a neutral prior), so it is neither starved nor
  // flooded.
  double prior = latency_known > 0 ? latency_sum / static_cast<double>(latency_known) : 1.0;
  auto score = [&](int i) {
    const auto& member = members[i];
    double latency = member.latency_ewma_us > 0 ? member.latency_ewma_us : prior;
    return latency * static_cast<double>(member.outstanding + 1);
  };
  std::size_t first = std::uniform_int_distribution<std::size_t>(0, available - 1)(rng);
  std::size_t second = std::uniform_int_distribution<std::size_t>(0, available - 2)(rng);
  if (second >= first) ++second;
  int a = nth_available(members, first, usable);
  int b = nth_available(members, second, usable);
  return score(b) < score(a) ? b : a;
}

Result<std::unique_ptr<CloudPool>> CloudPool::create(
    const PoolConfig& config, std::shared_ptr<boost::asio::ssl::context> tls,
    std::shared_ptr<ResponseBudget> budget, const ChainConfig& chain) {
  std::unique_ptr<CloudPool> pool(new CloudPool(config));
  pool->metrics_ = pool_metrics(config.name);
  pool->panic_threshold_ = chain.breaker.enabled ? chain.breaker.panic_threshold : 0.0;
  pool->bulkhead_ = std::make_unique<Bulkhead>(config.name, chain.bulkhead_for(config.name));
  for (std::size_t i = 0; i < pool->config_.members.size(); ++i) {
    const UpstreamConfig& member = pool->config_.members[i];
    if (member.name.empty()) {
      return Error{"config_invalid", "pool '" + config.name + "' members[" + std::to_string(i) +
                                         "]: name is required"};
    }
    auto url = parse_url(member.base_url);
    if (!url) {
      return Error{url.error().code, "pool '" + config.name + "' upstream '" + member.name +
                                         "': " + url.error().message};
    }
    if (auto key = read_api_key(member, config.name); !key) return key.error();
    if (url->tls() && !member.tls_verify) {
      spdlog::warn("pool '{}' member '{}': tls_verify is false, so the upstream's certificate is "
                   "not checked (anyone on the path can read the key and the prompts)",
                   config.name, member.name);
    }
    std::shared_ptr<boost::asio::ssl::context> member_tls;
    if (url->tls()) {
      auto context = make_member_tls_context(member, tls);
      if (!context)
        return Error{context.error().code, "pool '" + config.name + "' " + context.error().message};
      member_tls = std::move(context).value();
      // Members without their own CA settings share one context.
      if (!tls && member.ca_file.empty() && member.tls_verify) tls = member_tls;
    }
    pool->members_.push_back(std::make_unique<UpstreamClient>(
        member, std::move(url).value(), std::move(member_tls), config.name, budget));
    pool->breakers_.push_back(
        std::make_unique<CircuitBreaker>(chain.breaker, config.name, member.name));
  }
  return pool;
}

// One admitted call's bookkeeping: its outcome goes to the member's breaker exactly once (as
// "ignored" when the call ends by an exception or without an outcome, so a half-open probe
// slot is never leaked), and a counted failure penalises the member's latency score.
class CloudPool::Attempt {
 public:
  Attempt(CloudPool& pool, std::size_t member, Admission admission, bool stream)
      : pool_(pool), member_(member), admission_(admission), stream_(stream) {}
  ~Attempt() {
    if (!recorded_) record(CallReport(CallOutcome::ignored), nullptr);
  }
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  // `now`: when the call ended (a buffered reply's own reading), or the clock.
  void succeeded(Clock::time_point now = Clock::now()) {
    CallReport report(CallOutcome::success);
    report.stream = stream_;
    record(report, nullptr, now);
  }
  // Marks `error` when the call went to an open member (the chain then does not retry it).
  void failed(UpstreamError& error) {
    error.member_open = admission_.panic;
    if (!counts_against_member(error.kind)) return record(CallReport(CallOutcome::ignored), nullptr);
    UpstreamClient& member = *pool_.members_[member_];
    // ttft_timeout_ms is the longest a call may take before it is abandoned, so a failure
    // scores at least that badly; 4× the EWMA keeps the penalty biting for a member that is
    // already slower than that.
    double penalty_us = std::max(static_cast<double>(member.config().ttft_timeout_ms) * 1000.0,
                                 4.0 * member.latency_ewma_us());
    member.add_latency_sample(std::chrono::microseconds(static_cast<std::int64_t>(penalty_us)));
    CallReport report(CallOutcome::failure);
    report.outage = error.kind == UpstreamErrorKind::connect_failed ||
                    error.kind == UpstreamErrorKind::connect_timeout ||
                    error.kind == UpstreamErrorKind::ttft_timeout;
    report.stream = stream_;
    report.broke_midway = stream_ && error.after_first_byte;
    const Clock::time_point now = Clock::now();  // one reading for the peers and the record
    const WindowTotals peers = pool_.peers_of(member_, now);
    record(report, pool_.members_.size() > 1 ? &peers : nullptr, now);
  }

 private:
  void record(const CallReport& report, const WindowTotals* peers,
              Clock::time_point now = Clock::now()) {
    recorded_ = true;
    pool_.breakers_[member_]->record(admission_, report, now, peers);
  }

  CloudPool& pool_;
  std::size_t member_;
  Admission admission_;
  bool stream_;
  bool recorded_ = false;
};

bool CloudPool::in_panic(Clock::time_point now) { return update_panic(now, nullptr); }

WindowTotals CloudPool::peers_of(std::size_t member, Clock::time_point now) {
  WindowTotals peers;
  for (std::size_t i = 0; i < breakers_.size(); ++i) {
    if (i != member) peers += breakers_[i]->window(now);
  }
  return peers;
}

bool CloudPool::update_panic(Clock::time_point now, std::vector<MemberSignal>* signals) {
  std::size_t allowing = 0;
  for (std::size_t i = 0; i < breakers_.size(); ++i) {
    const bool allows = breakers_[i]->would_allow(now);
    if (allows) ++allowing;
    if (signals != nullptr) (*signals)[i].available = allows;
  }
  const double members = static_cast<double>(std::max<std::size_t>(1, breakers_.size()));
  metrics_.open_share->set(1.0 - static_cast<double>(allowing) / members);
  const bool panic = !breakers_.empty() &&
                     static_cast<double>(allowing) < panic_threshold_ * members;
  if (panic != panic_.exchange(panic)) {
    if (panic) {
      spdlog::warn("pool '{}': panic: {} of {} members allow calls (< panic_threshold {}); choosing "
                   "among all members, one attempt per call to an open member",
                   config_.name, allowing, breakers_.size(), panic_threshold_);
    } else {
      spdlog::info("pool '{}': panic ended: {} of {} members allow calls", config_.name, allowing,
                   breakers_.size());
    }
  }
  return panic;
}

CloudPool::Choice CloudPool::choose(const CallOptions& options, Clock::time_point now) {
  // The signals vector is reused per thread: choosing allocates nothing on the hot path.
  thread_local std::vector<MemberSignal> signals;
  signals.clear();
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const UpstreamClient& member = *members_[i];
    bool avoided = std::find(options.avoid.begin(), options.avoid.end(), member.name()) !=
                   options.avoid.end();
    signals.push_back({member.outstanding(), member.config().max_concurrent,
                       member.latency_score_us(now), true, avoided});
  }
  const bool panic = update_panic(now, &signals);
  if (panic) {
    // As if no member were open: the choice falls on latency and load alone.
    for (auto& signal : signals) signal.available = true;
  }
  // would_allow() does not take a half-open probe slot; allow() does, and can lose the slot to
  // a concurrent caller: that member is then unavailable and the choice is made again.
  for (std::size_t tries = 0; tries <= members_.size(); ++tries) {
    int index = 0;
    {
      std::lock_guard lock(rng_mutex_);
      index = pick_member(signals, config_.balancer, rng_);
    }
    if (index < 0) break;
    auto member = static_cast<std::size_t>(index);
    Admission admission =
        panic ? breakers_[member]->allow_in_panic(now) : breakers_[member]->allow(now);
    if (admission) {
      if (panic) metrics_.panic->inc();
      return {index, admission, std::nullopt};
    }
    signals[member].available = false;
  }
  return {-1, {}, overloaded_error()};
}

Result<CloudPool::Lease, UpstreamError> CloudPool::lease_for(Bulkhead::Permit permit, Deadline deadline,
                                                             const CallOptions& options) {
  const Clock::time_point now = Clock::now();  // one reading for the deadline and the choice
  if (deadline.passed(now)) return deadline_passed_error();
  Choice choice = choose(options, now);
  if (choice.index < 0) return std::move(*choice.error);
  return Lease{std::move(permit), static_cast<std::size_t>(choice.index), choice.admission};
}

std::optional<Result<CloudPool::Lease, UpstreamError>> CloudPool::admit_now(Deadline deadline,
                                                                            const CancelToken& cancel,
                                                                            const CallOptions& options) {
  if (cancel.cancelled()) return std::nullopt;  // admit() says why
  Bulkhead::Permit permit = bulkhead_->try_acquire();
  if (!permit.held()) return std::nullopt;
  return lease_for(std::move(permit), deadline, options);
}

awaitable<Result<CloudPool::Lease, UpstreamError>> CloudPool::admit(Deadline deadline, CancelToken& cancel,
                                                                    const CallOptions& options) {
  auto permit = co_await bulkhead_->acquire(deadline, cancel);
  if (!permit) co_return permit.error();
  co_return lease_for(std::move(*permit), deadline, options);
}

awaitable<std::optional<UpstreamError>> CloudPool::complete_into(const ForwardBody& request, Deadline deadline,
                                                                  CancelToken cancel, CallOptions options,
                                                                  UpstreamReply& reply) {
  auto lease = admit_now(deadline, cancel, options);
  if (!lease) lease.emplace(co_await admit(deadline, cancel, options));
  if (!*lease) co_return lease->error();
  UpstreamClient& member = *members_[(*lease)->member];
  Attempt attempt(*this, (*lease)->member, (*lease)->admission, /*stream=*/false);
  auto failed = co_await member.complete_into(request, deadline, std::move(cancel), reply);
  if (failed) {
    attempt.failed(*failed);
  } else {
    attempt.succeeded(reply.settled_at);
  }
  co_return failed;
}

awaitable<Result<UpstreamReply, UpstreamError>> CloudPool::complete(const ForwardBody& request,
                                                                    Deadline deadline,
                                                                    CancelToken cancel,
                                                                    CallOptions options) {
  UpstreamReply reply;
  if (auto failed = co_await complete_into(request, deadline, std::move(cancel), std::move(options), reply)) {
    co_return std::move(*failed);
  }
  co_return reply;
}

awaitable<Result<StreamSummary, UpstreamError>> CloudPool::stream(const ForwardBody& request,
                                                                  Deadline deadline,
                                                                  CancelToken cancel,
                                                                  ChunkSink sink,
                                                                  CallOptions options) {
  auto lease = admit_now(deadline, cancel, options);
  if (!lease) lease.emplace(co_await admit(deadline, cancel, options));
  if (!*lease) co_return lease->error();
  UpstreamClient& member = *members_[(*lease)->member];
  Attempt attempt(*this, (*lease)->member, (*lease)->admission, /*stream=*/true);
  if (options.on_chosen) options.on_chosen(breakers_[(*lease)->member]->stream_flaky(Clock::now()));
  auto result = co_await member.stream(request, deadline, std::move(cancel), std::move(sink));
  if (result) {
    attempt.succeeded();
  } else {
    attempt.failed(result.error());  // after the first chunk too: the member still broke
  }
  co_return std::move(result);
}

// Not the member's fault: no member is called, so no breaker counts it.
UpstreamError CloudPool::deadline_passed_error() const {
  UpstreamError error;
  error.kind = UpstreamErrorKind::total_timeout;
  error.message = "the deadline passed before pool '" + config_.name + "' could call a member";
  return error;
}

UpstreamError CloudPool::overloaded_error() const {
  metrics_.overloaded->inc();
  UpstreamError error;
  error.kind = UpstreamErrorKind::overloaded;
  error.message = "every member of pool '" + config_.name + "' is at max_concurrent";
  return error;
}

}  // namespace hengshi::cloud
