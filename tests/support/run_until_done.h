// Runs a coroutine on `executor` until `io` has no work left, and returns its value: unit tests
// of awaitable code without a server around it. An exception in the coroutine is rethrown.
#pragma once

#include <exception>
#include <optional>
#include <utility>

#include "core/asio.h"

namespace hengshi::testing {

template <class Executor, class MakeAwaitable>
auto run_until_done(boost::asio::io_context& io, Executor executor, MakeAwaitable make) {
  using Value = typename decltype(make())::value_type;
  std::optional<Value> out;
  boost::asio::co_spawn(
      executor, [&]() -> awaitable<void> { out.emplace(co_await make()); },
      [](std::exception_ptr failure) {
        if (failure) std::rethrow_exception(failure);
      });
  io.restart();
  io.run();
  return std::move(*out);
}

}  // namespace hengshi::testing
