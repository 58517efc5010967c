// The children of a benchmark (sims, gateways) die with it: they run in their own process groups
// (ChildProcess), so nothing else would stop them if the benchmark were interrupted or its
// watchdog fired. A signal handler can only reach a fixed array of atomics, hence this one piece
// of static state, shared by the benchmarks that start processes.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace hengshi::bench {

inline constexpr std::size_t kChildSlots = 8;

// On SIGINT, SIGTERM and SIGALRM (the watchdog: alarm(seconds) now): every tracked child is
// killed and the program exits (2 for the watchdog, with "<program>: watchdog: ..." on stderr).
void kill_children_on_exit(const char* program, unsigned watchdog_seconds);
// Tracks `pid` in `slot` (< kChildSlots); 0 forgets the slot's child.
void track_child(std::size_t slot, pid_t pid);
void forget_children();

}  // namespace hengshi::bench
