// SimStats: what the simulator has seen, served at GET /admin/stats so tests can assert what
// reached the upstream (which models, how many streamed, which faults were injected, whether the
// gateway cancelled by closing the connection). Every counter is declared here, in one list.
// Thread-safe: counters are atomics; the per-model map is guarded by a mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sim/request_plan.h"

namespace hengshi::sim {

class SimStats {
 public:
  void on_connection_accepted() { connections_accepted_.fetch_add(1, std::memory_order_relaxed); }
  // A client closed its connection while a request of its own was still being answered.
  void on_client_disconnect() { client_disconnects_.fetch_add(1, std::memory_order_relaxed); }
  void on_bad_request() { bad_requests_.fetch_add(1, std::memory_order_relaxed); }

  // A chat request was accepted and planned.
  void on_chat_request(std::string_view model, bool stream, Outcome outcome);
  void on_chat_started() { in_flight_.fetch_add(1, std::memory_order_relaxed); }
  void on_chat_finished() { in_flight_.fetch_sub(1, std::memory_order_relaxed); }

  std::uint64_t requests_total() const { return requests_total_.load(std::memory_order_relaxed); }
  std::uint64_t client_disconnects() const {
    return client_disconnects_.load(std::memory_order_relaxed);
  }
  std::int64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

  // Zeros every counter except in_flight, which tracks live requests.
  void reset();

  // {"requests_total", "requests_by_model": {...}, "streamed", "errors_injected": {"error",
  //  "rate_limit", "hang", "disconnect", "garbage"}, "in_flight", "connections_accepted",
  //  "client_disconnects", "bad_requests"}
  nlohmann::json to_json() const;

 private:
  static constexpr std::size_t kOutcomes = 6;

  std::atomic<std::uint64_t> requests_total_{0};
  std::atomic<std::uint64_t> streamed_{0};
  std::array<std::atomic<std::uint64_t>, kOutcomes> by_outcome_{};
  std::atomic<std::int64_t> in_flight_{0};
  std::atomic<std::uint64_t> connections_accepted_{0};
  std::atomic<std::uint64_t> client_disconnects_{0};
  std::atomic<std::uint64_t> bad_requests_{0};

  mutable std::mutex by_model_mutex_;
  std::map<std::string, std::uint64_t, std::less<>> by_model_;
};

}  // namespace hengshi::sim
