// Deadline: an absolute point on the steady clock by which a request must be answered.
// Every wait in the gateway is bounded by the request's deadline (DESIGN.md §3).
#pragma once

#include <algorithm>
#include <chrono>

namespace hengshi {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

class Deadline {
 public:
  Deadline() : at_(Clock::time_point::max()) {}
  explicit Deadline(Clock::time_point at) : at_(at) {}
  static Deadline after(Millis budget) { return Deadline(Clock::now() + budget); }
  static Deadline never() { return Deadline(); }

  Clock::time_point at() const { return at_; }
  bool passed(Clock::time_point now = Clock::now()) const { return now >= at_; }
  bool is_never() const { return at_ == Clock::time_point::max(); }

  // Time left, never negative; Millis::max() for a deadline that never passes.
  Millis remaining() const {
    if (is_never()) return Millis::max();
    return std::max(Millis(0), std::chrono::duration_cast<Millis>(at_ - Clock::now()));
  }

  // The earlier of this deadline and now + limit: a per-step timeout inside the overall budget.
  Deadline capped(Millis limit) const {
    auto candidate = Clock::now() + limit;
    return Deadline(std::min(at_, candidate));
  }

 private:
  Clock::time_point at_;
};

}  // namespace hengshi
