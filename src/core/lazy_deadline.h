// LazyDeadline: a time limit that costs a clock read to move, and one timer that wakes only when
// the limit may have passed.
//
// beast::tcp_stream arms and cancels a timer around every read and write. In a bare Beast proxy
// on loopback that cost a third of the CPU per request (a tcp_stream proxy against one on plain
// sockets: 29-33 µs vs 21-22 µs per request at 64 connections). Here expires_after(),
// expires_at() and expires_never() only write a time. The timer sleeps until the earlier of the
// limit and `period` from now; on waking it either finds the limit passed and runs `on_expire`
// once (which closes a socket, so the pending operation fails), or goes back to sleep toward the
// limit. A limit earlier than the timer's wake-up re-arms it at once. With a `period` no longer
// than any limit the owner sets, moving the limit never touches the timer: a keep-alive
// connection's timer wakes about once per period, not once per request. Without a period the timer
// sleeps until the limit, and stops while there is none.
//
// Not thread-safe: every call, and `on_expire`, run on the executor it was made with (the
// connection's or the call's strand).
#pragma once

#include <functional>
#include <memory>

#include "core/asio.h"
#include "core/deadline.h"

namespace hengshi {

class LazyDeadline {
 public:
  static constexpr Millis kNoPeriod = Millis::max();

  LazyDeadline(const asio::any_io_executor& executor, Millis period, std::function<void()> on_expire);
  ~LazyDeadline();  // on_expire is never called after this
  LazyDeadline(const LazyDeadline&) = delete;
  LazyDeadline& operator=(const LazyDeadline&) = delete;

  void expires_after(Millis timeout) { expires_at(Clock::now() + timeout); }
  void expires_at(Clock::time_point at);
  void expires_never();
  // True once a limit passed and on_expire ran; no limit is kept after that.
  bool expired() const;

 private:
  struct State;
  static void sleep(const std::shared_ptr<State>& state);
  std::shared_ptr<State> state_;  // shared with the timer's pending handler
};

}  // namespace hengshi
