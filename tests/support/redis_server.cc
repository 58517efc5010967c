#include "support/redis_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <stdexcept>
#include <thread>

#include "support/free_port.h"
#include "support/raw_socket.h"
#include "support/wait_until.h"

namespace hengshi::testing {

RedisServer::RedisServer() {
  const std::string binary = "/usr/bin/redis-server";
  if (::access(binary.c_str(), X_OK) != 0) {
    throw std::runtime_error(binary + " is missing: scripts/setup installs Debian's redis-server");
  }
  std::string output;
  for (int attempt = 0; attempt < 5; ++attempt) {
    port_ = free_loopback_port();
    process_ = std::make_unique<ChildProcess>(ChildProcess::launch(
        {binary, "--port", std::to_string(port_), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--protected-mode", "no", "--loglevel", "warning"}));
    if (wait_until([this] { return command("PING").rfind("+PONG", 0) == 0 || !process_->running(); },
                   std::chrono::seconds(10)) &&
        process_->running()) {
      return;
    }
    output = process_->output();
    process_.reset();
  }
  throw std::runtime_error("redis-server did not start:\n" + output);
}

void RedisServer::kill() {
  if (!process_) return;
  process_->signal(SIGKILL);
  process_->wait(std::chrono::seconds(5));
}

std::string RedisServer::command(const std::string& inline_command) const {
  try {
    RawSocket socket("127.0.0.1", port_);
    if (!socket.send(inline_command + "\r\n")) return "";
    // Redis answers at once; the peer keeps the connection open, so read what arrives briefly.
    std::string reply;
    wait_until(
        [&] {
          reply += socket.receive(std::chrono::milliseconds(20), 1 << 16);
          return reply.find("\r\n") != std::string::npos;
        },
        std::chrono::seconds(2));
    return reply;
  } catch (const std::exception&) {
    return "";
  }
}

}  // namespace hengshi::testing
