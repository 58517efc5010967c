// run_on: runs blocking work (a file reload, a model load) on a worker thread pool and resumes the
// awaiting coroutine on its own executor with the result, so an I/O thread never blocks on it.
#pragma once

#include "core/asio.h"

namespace hengshi {

// A plain function, not a coroutine: g++ 12 mis-destroys a lambda with init-captures passed as a
// temporary inside a co_await expression (free(): invalid pointer).
template <typename T, typename Work>
awaitable<T> run_on(asio::thread_pool& worker, Work work) {
  auto initiate = [&worker, work = std::move(work)](auto handler) mutable {
    // The caller's executor, tracked so its io_context keeps running until the result is back.
    auto caller = asio::prefer(asio::get_associated_executor(handler),
                               asio::execution::outstanding_work.tracked);
    asio::post(worker, [work = std::move(work), handler = std::move(handler),
                        caller = std::move(caller)]() mutable {
      T result = work();
      asio::post(caller, [handler = std::move(handler), result = std::move(result)]() mutable {
        handler(std::move(result));
      });
    });
  };
  return asio::async_initiate<decltype(use_awaitable), void(T)>(std::move(initiate), use_awaitable);
}

}  // namespace hengshi
