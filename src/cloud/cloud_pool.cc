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

// The `nth` member (0-based) among those with capacity.
int nth_available(const std::vector<MemberSignal>& members, std::size_t nth) {
  for (std::size_t i = 0; i < members.size(); ++i) {
    if (has_capacity(members[i]) && nth-- == 0) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

int pick_member(const std::vector<MemberSignal>& members, const std::string& balancer,
                std::mt19937_64& rng) {
  std::size_t available = 0;
  double latency_sum = 0;
  std::size_t latency_known = 0;
  for (const auto& member : members) {
    if (!has_capacity(member)) continue;
    ++available;
    if (member.latency_ewma_us > 0) {
      latency_sum += member.latency_ewma_us;
      ++latency_known;
    }
  }
  if (available == 0) return -1;
  if (available == 1) return nth_available(members, 0);

  if (balancer == "least_outstanding") {
    int best = -1;
    std::size_t ties = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (!has_capacity(members[i])) continue;
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
  int a = nth_available(members, first);
  int b = nth_available(members, second);
  return score(b) < score(a) ? b : a;
}

Result<std::unique_ptr<CloudPool>> CloudPool::create(
    const PoolConfig& config, std::shared_ptr<boost::asio::ssl::context> tls,
    std::shared_ptr<ResponseBudget> budget) {
  std::unique_ptr<CloudPool> pool(new CloudPool(config));
  pool->overloaded_total_ = &pool_overloaded_counter(config.name);
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
  }
  return pool;
}

UpstreamClient* CloudPool::choose() {
  // The signals vector is reused per thread: choosing allocates nothing on the hot path.
  thread_local std::vector<MemberSignal> signals;
  signals.clear();
  for (const auto& member : members_) {
    signals.push_back(
        {member->outstanding(), member->config().max_concurrent, member->latency_ewma_us()});
  }
  int index = 0;
  {
    std::lock_guard lock(rng_mutex_);
    index = pick_member(signals, config_.balancer, rng_);
  }
  return index < 0 ? nullptr : members_[static_cast<std::size_t>(index)].get();
}

awaitable<Result<UpstreamReply, UpstreamError>> CloudPool::complete(const nlohmann::json& request,
                                                                    Deadline deadline,
                                                                    CancelToken cancel) {
  UpstreamClient* member = choose();
  if (member == nullptr) co_return overloaded_error();
  co_return co_await member->complete(request, deadline, std::move(cancel));
}

awaitable<Result<StreamSummary, UpstreamError>> CloudPool::stream(const nlohmann::json& request,
                                                                  Deadline deadline,
                                                                  CancelToken cancel,
                                                                  ChunkSink sink) {
  UpstreamClient* member = choose();
  if (member == nullptr) co_return overloaded_error();
  co_return co_await member->stream(request, deadline, std::move(cancel), std::move(sink));
}

UpstreamError CloudPool::overloaded_error() const {
  overloaded_total_->inc();
  UpstreamError error;
  error.kind = UpstreamErrorKind::overloaded;
  error.message = "every member of pool '" + config_.name + "' is at max_concurrent";
  return error;
}

}  // namespace hengshi::cloud
