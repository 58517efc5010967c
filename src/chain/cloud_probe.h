// The background cloud probe of offline mode (issue 9 §5): while the gateway is offline it asks
// the cloud members, every interval, whether they answer (UpstreamClient::probe, GET /models)
// and switches the gateway back online at the first that does.
//
// Ownership and lifetime: `mode`, every member and `timer` must outlive the coroutine; the
// caller owns them (serve_command keeps them in run_serve's scope, next to `watch_files`'s
// timer). To stop: set *stopping, then cancel `timer`; the coroutine then ends at once when it is
// waiting, or after the probe in flight (each bounded by the interval and the member's
// connect/ttft timeouts). Run it on one strand (co_spawn(strand, ..., detached)); it never throws.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "chain/offline_mode.h"
#include "cloud/upstream_client.h"
#include "core/asio.h"

namespace hengshi::chain {

// One probe round: each member in turn, until one answers or `deadline` passes. Returns the
// member that answered, or null. Does not touch the offline state.
awaitable<cloud::UpstreamClient*> probe_members(const std::vector<cloud::UpstreamClient*>& members,
                                                Deadline deadline);

// Every `interval_ms` (at least 10 ms), while `mode` is offline, runs a probe round bounded by
// the interval and reports a member that answered to mode.record_probe(). Ends when *stopping
// is set or `timer` is cancelled; returns at once when `members` is empty.
// A free function, not a lambda: a lambda coroutine's captures die with the lambda.
awaitable<void> probe_while_offline(OfflineMode& mode, std::vector<cloud::UpstreamClient*> members,
                                    asio::steady_timer& timer, std::int64_t interval_ms,
                                    std::shared_ptr<std::atomic<bool>> stopping);

}  // namespace hengshi::chain
