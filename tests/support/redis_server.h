// RedisServer: a real redis-server (Debian's, installed by scripts/setup) for a test, on a free
// loopback port, with persistence off; killed with the object. Ready once it answers PING.
#pragma once

#include <memory>
#include <string>

#include "support/child_process.h"

namespace hengshi::testing {

class RedisServer {
 public:
  // Throws std::runtime_error (with the server's output) when it does not answer within 10 s.
  RedisServer();
  int port() const { return port_; }
  // SIGKILL: the way a crashed Redis goes (no goodbye to its clients).
  void kill();
  bool running() { return process_ && process_->running(); }
  // One command in RESP inline form ("DBSIZE"); the raw reply, "" when none came.
  std::string command(const std::string& inline_command) const;

 private:
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace hengshi::testing
