// ChildProcess: starts a real binary for an integration test (fork + exec), reads the
// "listening on http://HOST:PORT" line it prints, and stops it with a signal. The child's
// stdout/stderr go to files under the test's temp dir so a failure can show them.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace hengshi::testing {

class ChildProcess {
 public:
  // Starts `argv` and waits (bounded) for a line containing "listening on http://" on its stdout
  // or stderr.
  // Throws std::runtime_error with the child's output when it exits or times out first.
  static ChildProcess start(const std::vector<std::string>& argv,
                            std::chrono::milliseconds ready_timeout = std::chrono::seconds(20));

  // Starts `argv` without waiting for anything (a server whose readiness the caller checks its
  // own way, e.g. redis-server answering PING).
  static ChildProcess launch(const std::vector<std::string>& argv);

  // Runs `argv` to completion (a CLI command such as `hengshi train`); kills it at the timeout.
  struct Finished {
    std::optional<int> exit_code;  // nullopt: killed at the timeout
    std::string output;            // stdout + stderr, labelled
    std::string stdout_text;       // stdout alone
  };
  // `stdin_path` ("" = /dev/null) is the child's standard input.
  static Finished run(const std::vector<std::string>& argv,
                      std::chrono::milliseconds timeout = std::chrono::seconds(120),
                      const std::string& stdin_path = "");

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  const std::string& host() const { return host_; }
  int port() const { return port_; }
  std::string base_url() const { return "http://" + host_ + ":" + std::to_string(port_); }
  // The admin listener's port, from the "admin listening on http://HOST:PORT" line `hengshi
  // serve` prints after the public one (waits for it, bounded); throws when there is none.
  int admin_port();

  void signal(int signal_number) const;
  // Waits (bounded) for exit; returns the exit status, or nullopt on timeout.
  std::optional<int> wait(std::chrono::milliseconds timeout);
  bool running();
  std::string output() const;       // stdout + stderr so far
  std::string stdout_text() const;  // stdout alone, so far

 private:
  ChildProcess() = default;
  static ChildProcess spawn(const std::vector<std::string>& argv, const std::string& stdin_path = "");
  pid_t pid_ = -1;
  std::string host_;
  int port_ = 0;
  int admin_port_ = 0;
  std::string stdout_path_;
  std::string stderr_path_;
  bool reaped_ = false;
};

// Path of a built binary: $HENGSHI_BIN_DIR/<relative>.
std::string binary_path(const std::string& relative);
// Path in the source tree: $HENGSHI_SOURCE_DIR/<relative> (set by ctest), else found from this
// file's location.
std::string source_path(const std::string& relative);
// A fresh temp file path under the test temp dir.
std::string temp_path(const std::string& name);

}  // namespace hengshi::testing
