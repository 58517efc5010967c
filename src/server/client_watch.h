// ClientWatch: notices a client that leaves while its request waits (on an upstream, the edge
// LLM), so that work is cancelled. A one-byte MSG_PEEK receive pending on the client's socket:
// end of stream or a reset cancels the request's token; bytes (a pipelined next request) leave
// the client alive and just end the watch.
//
// The peek is armed late, by ClientWatchArming, only for a request still waiting after a delay.
// Armed at once it cost a syscall per request: Asio tries a receive at once whenever an epoll
// event for the socket came in since its last read, which under load is nearly always, and the
// peek then fails with EAGAIN. An answer within the delay (a fast upstream, most requests at
// load) now costs no syscall; a client that leaves is noticed within one to two delays, which is
// small beside a cloud call's latency.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/cancel_token.h"

namespace hengshi::server {

class ClientWatch : public std::enable_shared_from_this<ClientWatch> {
 public:
  // `connection` owns `socket`; the watch holds it weakly, so a connection that ended is not
  // kept open by a watch waiting to be armed.
  ClientWatch(CancelToken client_gone, boost::asio::ip::tcp::socket& socket, std::weak_ptr<void> connection)
      : client_gone_(std::move(client_gone)), socket_(socket), connection_(std::move(connection)) {}

  // Whether the request still waits: read by the arming timer from any thread.
  bool active() const { return active_.load(std::memory_order_acquire); }
  // On the connection's strand: the handler is about to wait. True the first time.
  bool want() { return !std::exchange(wanted_, true) && active(); }
  // From any thread: starts the peek on the connection's strand, unless the watch ended or the
  // connection is gone.
  void arm_on_strand();
  // On the connection's strand, once: the answer's last bytes went out (or the handler
  // returned). A pending peek is cancelled (Asio dequeues it; no syscall).
  void end();

 private:
  void arm(const std::shared_ptr<void>& connection);

  CancelToken client_gone_;  // touched only on the connection's strand
  boost::asio::ip::tcp::socket& socket_;
  std::weak_ptr<void> connection_;
  std::atomic<bool> active_{true};
  bool wanted_ = false;  // strand only
  bool armed_ = false;   // strand only
  char probe_ = 0;
};

// Arms the watches of requests still waiting `delay` after they asked, in batches from one
// timer that ticks only while watches are pending (at load: one tick per delay, not one timer
// per request). Thread-safe.
class ClientWatchArming {
 public:
  using Clock = std::chrono::steady_clock;

  ClientWatchArming(boost::asio::io_context& io, Clock::duration delay) : delay_(delay), timer_(io) {}
  ClientWatchArming(const ClientWatchArming&) = delete;
  ClientWatchArming& operator=(const ClientWatchArming&) = delete;

  void add(std::shared_ptr<ClientWatch> watch);
  // No more ticks; pending watches are dropped (their requests are being cancelled anyway).
  void stop();

 private:
  void schedule_locked(Clock::time_point at);
  void tick();

  const Clock::duration delay_;
  std::mutex mutex_;
  boost::asio::steady_timer timer_;  // touched only under mutex_
  std::deque<std::pair<Clock::time_point, std::shared_ptr<ClientWatch>>> pending_;  // by due time
  bool ticking_ = false;
  bool stopped_ = false;
};

}  // namespace hengshi::server
