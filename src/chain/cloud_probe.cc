#include "chain/cloud_probe.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

namespace hengshi::chain {

namespace {

constexpr std::int64_t kMinIntervalMs = 10;  // a zero interval would spin

}  // namespace

awaitable<cloud::UpstreamClient*> probe_members(const std::vector<cloud::UpstreamClient*>& members,
                                                Deadline deadline) {
  for (cloud::UpstreamClient* member : members) {
    if (member == nullptr) continue;
    if (deadline.passed()) break;
    bool answered = co_await member->probe(deadline);
    if (answered) co_return member;
    spdlog::debug("offline probe: member '{}' did not answer", member->name());
  }
  co_return nullptr;
}

awaitable<void> probe_while_offline(OfflineMode& mode, std::vector<cloud::UpstreamClient*> members,
                                    asio::steady_timer& timer, std::int64_t interval_ms,
                                    std::shared_ptr<std::atomic<bool>> stopping) {
  if (members.empty()) co_return;
  const Millis interval(std::max(kMinIntervalMs, interval_ms));
  auto stopped = [&stopping] { return stopping && stopping->load(); };
  try {
    while (!stopped()) {
      timer.expires_after(interval);
      beast::error_code ec;
      co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
      if (ec || stopped()) co_return;
      if (!mode.offline()) continue;  // one atomic load per interval while online
      // A round never outlasts the interval, so the next one starts on time and a stop waits
      // at most this long.
      cloud::UpstreamClient* answered = co_await probe_members(members, Deadline::after(interval));
      if (answered != nullptr && !stopped()) mode.record_probe(true, answered->name());
    }
  } catch (const std::exception& failure) {
    // Nothing here should throw. If something does, the gateway keeps serving (from the edge
    // while offline); the error log says why it no longer comes back online by itself.
    spdlog::error("offline probe stopped: {}; offline mode will not end by itself", failure.what());
  }
}

}  // namespace hengshi::chain
