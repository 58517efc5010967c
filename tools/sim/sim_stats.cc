#include "sim/sim_stats.h"

#include <utility>

namespace hengshi::sim {

void SimStats::on_chat_request(std::string_view model, bool stream, Outcome outcome) {
  requests_total_.fetch_add(1, std::memory_order_relaxed);
  if (stream) streamed_.fetch_add(1, std::memory_order_relaxed);
  by_outcome_[static_cast<std::size_t>(outcome)].fetch_add(1, std::memory_order_relaxed);
  std::lock_guard lock(by_model_mutex_);
  auto it = by_model_.find(model);
  if (it == by_model_.end()) it = by_model_.emplace(std::string(model), 0).first;
  ++it->second;
}

void SimStats::reset() {
  requests_total_.store(0, std::memory_order_relaxed);
  streamed_.store(0, std::memory_order_relaxed);
  for (auto& count : by_outcome_) count.store(0, std::memory_order_relaxed);
  connections_accepted_.store(0, std::memory_order_relaxed);
  client_disconnects_.store(0, std::memory_order_relaxed);
  bad_requests_.store(0, std::memory_order_relaxed);
  std::lock_guard lock(by_model_mutex_);
  by_model_.clear();
}

nlohmann::json SimStats::to_json() const {
  nlohmann::json errors = nlohmann::json::object();
  for (Outcome outcome : {Outcome::kError, Outcome::kRateLimit, Outcome::kHang,
                          Outcome::kDisconnect, Outcome::kGarbage}) {
    errors[outcome_name(outcome)] =
        by_outcome_[static_cast<std::size_t>(outcome)].load(std::memory_order_relaxed);
  }
  nlohmann::json by_model = nlohmann::json::object();
  {
    std::lock_guard lock(by_model_mutex_);
    for (const auto& [model, count] : by_model_) by_model[model] = count;
  }
  return {
      {"requests_total", requests_total_.load(std::memory_order_relaxed)},
      {"requests_by_model", std::move(by_model)},
      {"streamed", streamed_.load(std::memory_order_relaxed)},
      {"errors_injected", std::move(errors)},
      {"in_flight", in_flight_.load(std::memory_order_relaxed)},
      {"connections_accepted", connections_accepted_.load(std::memory_order_relaxed)},
      {"client_disconnects", client_disconnects_.load(std::memory_order_relaxed)},
      {"bad_requests", bad_requests_.load(std::memory_order_relaxed)},
  };
}

}  // namespace hengshi::sim
