// yield_turn: lets the handlers already queued on the executor run before the coroutine goes on.
//
// Used on the proxy path around the socket operations, where the order of work changes what the
// kernel does (bench/overhead --saturate, DESIGN-NOTES "Hot path"):
// - before the read that waits for an answer to our own write (the upstream's reply, the client's
//   next request): the bytes cannot be there yet, and a read tried at once fails (EAGAIN) and
//   parks in epoll; after a turn it is more often answered at once;
// - before a write: the writes of one pass through the queue reach a peer together, so a sleeping
//   peer is woken once for them, not once each (the wake-up runs inside our send and was the
//   biggest single cost of the gateway's CPU at 64 connections).
#pragma once

#include "core/asio.h"

namespace hengshi {

// `co_await yield_turn();` A post to the back of the coroutine's executor; no frame of its own.
inline auto yield_turn() { return asio::post(asio::use_awaitable); }

}  // namespace hengshi
