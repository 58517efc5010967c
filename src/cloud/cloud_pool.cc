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
  pool->overloaded_total_ = &pool_overloaded_counter(config.name);
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
  Attempt(UpstreamClient& member, CircuitBreaker& breaker, Admission admission)
      : member_(member), breaker_(breaker), admission_(admission) {}
  ~Attempt() {
    if (!recorded_) breaker_.record(admission_, CallOutcome::ignored, Clock::now());
  }
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;

  void succeeded() { record(CallOutcome::success); }
  void failed(const UpstreamError& error) {
    if (!counts_against_member(error.kind)) return record(CallOutcome::ignored);
    // ttft_timeout_ms is the longest a call may take before it is abandoned, so a failure
    // scores at least that badly; 4× the EWMA keeps the penalty biting for a member that is
    // already slower than that.
    double penalty_us = std::max(static_cast<double>(member_.config().ttft_timeout_ms) * 1000.0,
                                 4.0 * member_.latency_ewma_us());
    member_.add_latency_sample(std::chrono::microseconds(static_cast<std::int64_t>(penalty_us)));
    record(CallOutcome::failure);
  }

 private:
  void record(CallOutcome outcome) {
    recorded_ = true;
    breaker_.record(admission_, outcome, Clock::now());
  }

  UpstreamClient& member_;
  CircuitBreaker& breaker_;
  Admission admission_;
  bool recorded_ = false;
};

bool CloudPool::any_member_available(Clock::time_point now) {
  return std::any_of(breakers_.begin(), breakers_.end(),
                     [now](const auto& breaker) { return breaker->would_allow(now); });
}

std::optional<UpstreamError> CloudPool::circuit_open_error(Clock::time_point now) {
  if (members_.empty() || any_member_available(now)) return std::nullopt;
  // A member whose half-open probe is in flight is not open; its answer is due soon, so it
  // counts as 1 s (Retry-After has whole seconds anyway).
  Millis shortest = Millis::max();
  for (const auto& breaker : breakers_) {
    Millis remaining = breaker->open_remaining(now);
    shortest = std::min(shortest, remaining > Millis(0) ? remaining : Millis(1000));
  }
  UpstreamError error;
  error.kind = UpstreamErrorKind::circuit_open;
  error.message = "pool '" + config_.name + "' (" + std::to_string(members_.size()) +
                  " members; the next probe is allowed in " + std::to_string(shortest.count()) +
                  " ms)";
  error.retry_after_ms = shortest.count();
  return error;
}

CloudPool::Choice CloudPool::choose(const CallOptions& options) {
  const Clock::time_point now = Clock::now();
  // The signals vector is reused per thread: choosing allocates nothing on the hot path.
  thread_local std::vector<MemberSignal> signals;
  signals.clear();
  for (std::size_t i = 0; i < members_.size(); ++i) {
    const UpstreamClient& member = *members_[i];
    bool avoided = std::find(options.avoid.begin(), options.avoid.end(), member.name()) !=
                   options.avoid.end();
    signals.push_back({member.outstanding(), member.config().max_concurrent,
                       member.latency_ewma_us(), breakers_[i]->would_allow(now), avoided});
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
    Admission admission = breakers_[member]->allow(now);
    if (admission) return {index, admission, std::nullopt};
    signals[member].available = false;
  }
  if (auto open = circuit_open_error(now)) return {-1, {}, std::move(open)};
  return {-1, {}, overloaded_error()};
}

awaitable<Result<CloudPool::Lease, UpstreamError>> CloudPool::admit(Deadline deadline, CancelToken& cancel,
                                                                    const CallOptions& options) {
  // Every member open: refused before queueing, so a dead pool costs its callers nothing.
  if (auto open = circuit_open_error(Clock::now())) co_return std::move(*open);
  auto permit = co_await bulkhead_->acquire(deadline, cancel);
  if (!permit) co_return permit.error();
  if (deadline.passed()) co_return deadline_passed_error();
  Choice choice = choose(options);
  if (choice.index < 0) co_return std::move(*choice.error);
  co_return Lease{std::move(*permit), static_cast<std::size_t>(choice.index), choice.admission};
}

awaitable<Result<UpstreamReply, UpstreamError>> CloudPool::complete(const nlohmann::json& request,
                                                                    Deadline deadline,
                                                                    CancelToken cancel,
                                                                    CallOptions options) {
  auto lease = co_await admit(deadline, cancel, options);
  if (!lease) co_return lease.error();
  UpstreamClient& member = *members_[lease->member];
  Attempt attempt(member, *breakers_[lease->member], lease->admission);
  auto result = co_await member.complete(request, deadline, std::move(cancel));
  if (result) {
    attempt.succeeded();
  } else {
    attempt.failed(result.error());
  }
  co_return std::move(result);
}

awaitable<Result<StreamSummary, UpstreamError>> CloudPool::stream(const nlohmann::json& request,
                                                                  Deadline deadline,
                                                                  CancelToken cancel,
                                                                  ChunkSink sink,
                                                                  CallOptions options) {
  auto lease = co_await admit(deadline, cancel, options);
  if (!lease) co_return lease.error();
  UpstreamClient& member = *members_[lease->member];
  Attempt attempt(member, *breakers_[lease->member], lease->admission);
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
  overloaded_total_->inc();
  UpstreamError error;
  error.kind = UpstreamErrorKind::overloaded;
  error.message = "every member of pool '" + config_.name + "' is at max_concurrent";
  return error;
}

}  // namespace hengshi::cloud
