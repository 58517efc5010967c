// wait_until: polls a condition until it holds or a bound passes — synchronisation on an
// observable state, never a fixed sleep.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace hengshi::testing {

inline bool wait_until(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return condition();
}

}  // namespace hengshi::testing
