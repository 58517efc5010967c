// SimRandom: the random source of one simulated request. It is a pure function of
// (seed, request_index), so `hengshi-sim --seed N` replays the same behaviour for the k-th
// request on every run, whatever the other requests or threads did. SplitMix64 is used
// instead of <random> distributions because the standard distributions are
// implementation-defined; these draws are the same on every platform.
// Not thread-safe; one instance per request, on the stack.
#pragma once

#include <cmath>
#include <cstdint>

namespace hengshi::sim {

class SimRandom {
 public:
  SimRandom(std::uint64_t seed, std::uint64_t request_index)
      : state_(mix(seed ^ mix(request_index + 0x9e3779b97f4a7c15ULL))) {}

  std::uint64_t next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return mix(state_);
  }

  // Uniform in [0, 1), 53 bits.
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform integer in [lo, hi]; hi >= lo. The modulo bias is below 2^-40 for our ranges.
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
    auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(next() % span);
  }

  // Standard normal by Box-Muller (one value per call; the pair's twin is discarded so a draw
  // never depends on an earlier call).
  double standard_normal() {
    double u1 = 1.0 - uniform01();  // (0, 1]: log is finite
    double u2 = uniform01();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  }

 private:
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t state_;
};

}  // namespace hengshi::sim
