#include "core/lazy_deadline.h"

#include <algorithm>

namespace hengshi {

struct LazyDeadline::State {
  State(const asio::any_io_executor& executor, Millis p, std::function<void()> expire)
      : timer(executor), period(p), on_expire(std::move(expire)) {}
  asio::steady_timer timer;
  Millis period;
  std::function<void()> on_expire;  // empty once the owner is gone
  Clock::time_point limit = Clock::time_point::max();
  Clock::time_point wake = Clock::time_point::max();  // the pending wait's expiry; max: none
  bool expired = false;

  // The next wake-up from `now`: the limit, or sooner by the period.
  Clock::time_point next_wake(Clock::time_point now) const {
    if (period == kNoPeriod) return limit;
    return now + std::min<Clock::duration>(period, limit - now);
  }
};

LazyDeadline::LazyDeadline(const asio::any_io_executor& executor, Millis period,
                           std::function<void()> on_expire)
    : state_(std::make_shared<State>(executor, std::max(period, Millis(1)), std::move(on_expire))) {}

LazyDeadline::~LazyDeadline() {
  state_->on_expire = nullptr;
  state_->timer.cancel();
}

void LazyDeadline::sleep(const std::shared_ptr<State>& state) {
  state->timer.expires_at(state->wake);  // cancels a pending wait: its handler sees the error
  state->timer.async_wait([state](const boost::system::error_code& ec) {
    if (ec || !state->on_expire) return;  // re-armed, or the owner is gone
    const auto now = Clock::now();
    if (state->limit <= now) {
      state->expired = true;
      state->limit = state->wake = Clock::time_point::max();
      state->on_expire();
      return;
    }
    if (state->limit == Clock::time_point::max() && state->period == kNoPeriod) {
      state->wake = Clock::time_point::max();  // no limit: sleep until one is set
      return;
    }
    state->wake = state->limit == Clock::time_point::max() ? now + state->period : state->next_wake(now);
    sleep(state);
  });
}

void LazyDeadline::expires_at(Clock::time_point at) {
  State& state = *state_;
  if (state.expired) return;
  state.limit = at;
  if (at < state.wake) {  // the first limit, or one sooner than the planned wake-up
    state.wake = state.next_wake(Clock::now());
    sleep(state_);
  }
}

void LazyDeadline::expires_never() { state_->limit = Clock::time_point::max(); }

bool LazyDeadline::expired() const { return state_->expired; }

}  // namespace hengshi
