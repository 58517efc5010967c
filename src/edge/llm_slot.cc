#include "edge/llm_slot.h"

#include <filesystem>

#include "obs/metrics.h"

namespace hengshi::edge {
namespace {

void set_info(const LlmServing& serving, double value) {
  const std::string model = std::filesystem::path(serving.state.model_path).filename().string();
  auto& registry = obs::Registry::global();
  const char* help = "Edge LLM serving: base model file and adapters (1 = serving now)";
  registry.gauge("hengshi_edge_llm_model_info", help,
                 {{"model", model}, {"adapter", ""}, {"version", serving.state.model_version}})
      .set(value);
  for (const auto& [task, adapter] : serving.state.adapters) {
    registry.gauge("hengshi_edge_llm_model_info", help, {{"model", model}, {"adapter", task}, {"version", adapter.version}})
        .set(value);
  }
}

}  // namespace

LlmSlot::LlmSlot(std::shared_ptr<const LlmServing> serving, bool keep_previous)
    : keep_previous_(keep_previous), current_(std::move(serving)) {
  publish(nullptr, *current_);
}

std::shared_ptr<const LlmServing> LlmSlot::current() const {
  std::lock_guard lock(mutex_);
  return current_;
}

std::shared_ptr<const LlmServing> LlmSlot::previous() const {
  std::lock_guard lock(mutex_);
  return previous_;
}

void LlmSlot::swap_in(std::shared_ptr<const LlmServing> next) {
  std::shared_ptr<const LlmServing> dropped;  // freed outside the lock
  {
    std::lock_guard lock(mutex_);
    dropped = std::move(previous_);
    previous_ = std::move(current_);
    current_ = std::move(next);
    publish(previous_.get(), *current_);
    if (!keep_previous_) dropped = std::move(previous_);
  }
}

bool LlmSlot::swap_back() {
  std::shared_ptr<const LlmServing> dropped;
  {
    std::lock_guard lock(mutex_);
    if (!previous_) return false;
    dropped = std::move(current_);
    current_ = std::move(previous_);
    publish(dropped.get(), *current_);
  }
  return true;
}

void LlmSlot::publish(const LlmServing* stopped, const LlmServing& serving) {
  if (stopped != nullptr) set_info(*stopped, 0);
  set_info(serving, 1);
}

}  // namespace hengshi::edge
