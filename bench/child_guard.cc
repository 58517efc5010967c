#include "child_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>

namespace hengshi::bench {
namespace {

std::array<std::atomic<pid_t>, kChildSlots> g_child_pids{};
std::array<char, 160> g_watchdog_message{};  // built before the handler is installed
std::size_t g_watchdog_length = 0;

void kill_children_and_exit(int signal_number) {
  for (auto& pid : g_child_pids) {
    if (pid_t p = pid.load(); p > 0) ::kill(p, SIGKILL);
  }
  if (signal_number == SIGALRM) (void)!::write(STDERR_FILENO, g_watchdog_message.data(), g_watchdog_length);
  ::_exit(signal_number == SIGALRM ? 2 : 128 + signal_number);
}

}  // namespace

void kill_children_on_exit(const char* program, unsigned watchdog_seconds) {
  static const char suffix[] = ": watchdog: the run took too long, stopped\n";
  const std::size_t name = std::min(std::strlen(program), g_watchdog_message.size() - sizeof(suffix));
  std::memcpy(g_watchdog_message.data(), program, name);
  std::memcpy(g_watchdog_message.data() + name, suffix, sizeof(suffix) - 1);
  g_watchdog_length = name + sizeof(suffix) - 1;
  struct sigaction action {};
  action.sa_handler = kill_children_and_exit;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGALRM}) sigaction(signal_number, &action, nullptr);
  ::alarm(watchdog_seconds);
}

void track_child(std::size_t slot, pid_t pid) { g_child_pids[slot].store(pid); }

void forget_children() {
  for (auto& slot : g_child_pids) slot.store(0);
}

}  // namespace hengshi::bench
