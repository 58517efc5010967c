// SimServer: the HTTP side of hengshi-sim, an OpenAI-compatible upstream that plays a Profile.
//   POST /v1/chat/completions   JSON or SSE (stream: true), shaped by the profile and markers
//   GET  /v1/models, GET /healthz
//   GET  /admin/profile         the active profile as JSON
//   POST /admin/profile         replace it (JSON body, validated whole; 400 on a bad one)
//   GET  /admin/stats           counters (sim_stats.h)
//   POST /admin/reset           zero the counters and the arrival index (a seeded run replays)
// One coroutine per connection on its own strand; every wait is a timer await, so a hanging or
// slow request never holds up another connection. The hot path (zero-latency, non-stream) does
// no logging and reuses the connection's read buffer.
//
// Lifetime: the server's state is shared with its coroutines, which run on the io_context given
// to the constructor; it serves until stop() or until that io_context stops. Destroying the
// SimServer object while the io_context runs is safe (the coroutines keep the state alive).
// Thread-safety: set_profile(), profile(), stats() and reset() may be called from any thread;
// listen() must be called once, before the io_context serves.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/asio.h"
#include "core/result.h"
#include "sim/profile.h"
#include "sim/sim_stats.h"

namespace hengshi::sim {

struct SimServerState;  // shared by the server and its coroutines (sim_server.cc)

struct SimOptions {
  std::string name = "sim";  // echoed in X-Sim-Name, the "sim" object and the content tag
  std::uint64_t seed = 0;    // request k's draws are a pure function of (seed, k)
  std::chrono::milliseconds idle_timeout{120'000};  // idle keep-alive connections are closed
  std::size_t max_body_bytes = 8 << 20;             // larger request bodies get 413
};

class SimServer {
 public:
  SimServer(asio::io_context& io, SimOptions options, Profile profile);

  // Binds and listens on `endpoint` (port 0 picks a free port) and starts accepting.
  // Returns the bound endpoint, with the real port.
  Result<tcp::endpoint> listen(const tcp::endpoint& endpoint);

  // Stops accepting new connections; connections already open finish their requests.
  void stop();

  void set_profile(Profile profile);
  std::shared_ptr<const Profile> profile() const;
  const SimStats& stats() const;
  void reset();

 private:
  std::shared_ptr<SimServerState> state_;
};

}  // namespace hengshi::sim
