// Budget: a request's time, parsed once (body hengshi.deadline_ms or X-Hengshi-Deadline-Ms,
// else server.default_deadline_ms) and passed as this type from the router down to every
// upstream call and edge engine (DESIGN-NOTES "The chain").
//
// Each level of the chain gets a share of the time *remaining when it starts* (LevelShares:
// L0 0.7, L1 0.3, L2 0.5, L3 0.8 by default), so a slow first level always leaves room for the
// next; the last level before the last resort gets everything except the last resort's fixed
// reserve, and the last resort gets what is left. Value type; thread-compatible.
#pragma once

#include <algorithm>
#include <chrono>

#include "core/chain_config.h"
#include "core/deadline.h"
#include "core/decision.h"

namespace hengshi {

class Budget {
 public:
  Budget() = default;
  Budget(Deadline deadline, LevelShares shares) : deadline_(deadline), shares_(shares) {}
  static Budget after(Millis total, LevelShares shares = {}) { return Budget(Deadline::after(total), shares); }

  Deadline deadline() const { return deadline_; }
  Millis remaining(Clock::time_point now = Clock::now()) const {
    if (deadline_.is_never()) return Millis::max();
    // Rounded up: a budget of 1000 ms read a microsecond later is still 1000 ms, not 999.
    return std::max(Millis(0), std::chrono::ceil<Millis>(deadline_.at() - now));
  }
  bool spent(Clock::time_point now = Clock::now()) const { return now >= deadline_.at(); }
  const LevelShares& shares() const { return shares_; }

  double share_of(Level level) const {
    switch (level) {
      case Level::edge: return shares_.edge;
      case Level::edge_degraded: return shares_.edge_degraded;
      case Level::cloud_small: return shares_.cloud_small;
      case Level::cloud_large: return shares_.cloud_large;
      case Level::last_resort: return 1.0;
    }
    return 1.0;
  }

  // The deadline of a level that starts at `now`. `last_before_resort`: no level but the last
  // resort follows, so this one may use all but the reserve. Never later than the request's.
  Deadline for_level(Level level, bool last_before_resort, Clock::time_point now = Clock::now()) const {
    if (deadline_.is_never()) return deadline_;
    const Millis left = remaining(now);
    const Millis reserve(shares_.last_resort_ms);
    Millis slice;
    if (level == Level::last_resort) {
      slice = left;
    } else if (last_before_resort) {
      slice = std::max(Millis(0), left - reserve);
    } else {
      slice = Millis(static_cast<Millis::rep>(static_cast<double>(left.count()) * share_of(level)));
    }
    return Deadline(std::min(deadline_.at(), now + slice));
  }

 private:
  Deadline deadline_;
  LevelShares shares_;
};

}  // namespace hengshi
