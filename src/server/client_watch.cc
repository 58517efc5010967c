#include "server/client_watch.h"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/beast/core/error.hpp>

namespace hengshi::server {

namespace asio = boost::asio;

void ClientWatch::arm_on_strand() {
  if (!active()) return;
  std::shared_ptr<void> connection = connection_.lock();
  if (!connection) return;
  asio::post(socket_.get_executor(), [self = shared_from_this(), connection = std::move(connection)] {
    self->arm(connection);
  });
}

void ClientWatch::arm(const std::shared_ptr<void>& connection) {
  if (armed_ || !active()) return;  // once, and never after the answer went out
  armed_ = true;
  // The handler owns what it touches: the watch (token, probe byte) and the connection (socket).
  socket_.async_receive(asio::buffer(&probe_, 1), asio::ip::tcp::socket::message_peek,
                        [self = shared_from_this(), connection](const boost::beast::error_code& ec, std::size_t) {
                          // Bytes (a pipelined request) leave the client alive; cancellation ends
                          // the watch.
                          if (!self->active() || !ec || ec == asio::error::operation_aborted) return;
                          self->client_gone_.cancel();  // end of stream, or the connection reset
                        });
}

void ClientWatch::end() {
  if (!active_.exchange(false, std::memory_order_acq_rel)) return;
  if (!armed_) return;
  boost::beast::error_code ec;
  socket_.cancel(ec);
}

void ClientWatchArming::add(std::shared_ptr<ClientWatch> watch) {
  const auto now = Clock::now();
  std::lock_guard lock(mutex_);
  if (stopped_) return;
  pending_.emplace_back(now + delay_, std::move(watch));
  if (!ticking_) schedule_locked(now + delay_);
}

void ClientWatchArming::stop() {
  std::lock_guard lock(mutex_);
  stopped_ = true;
  pending_.clear();
  timer_.cancel();
}

void ClientWatchArming::schedule_locked(Clock::time_point at) {
  ticking_ = true;
  timer_.expires_at(at);
  // The arming outlives no tick: the owner stops it (cancelling this wait) before it goes.
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) tick();
  });
}

void ClientWatchArming::tick() {
  const auto now = Clock::now();
  std::deque<std::pair<Clock::time_point, std::shared_ptr<ClientWatch>>> due;
  {
    std::lock_guard lock(mutex_);
    ticking_ = false;
    if (stopped_) return;
    // Due times only grow along the queue (one delay after each add).
    while (!pending_.empty() && pending_.front().first <= now) {
      due.push_back(std::move(pending_.front()));
      pending_.pop_front();
    }
    // Batched: the next tick is a whole delay away, so a steady stream of requests costs one
    // tick per delay, and a watch is armed between one and two delays after it asked.
    if (!pending_.empty()) schedule_locked(std::max(pending_.front().first, now + delay_));
  }
  for (auto& [at, watch] : due) watch->arm_on_strand();  // a watch that ended is just dropped
}

}  // namespace hengshi::server
