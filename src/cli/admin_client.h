// admin_call: one blocking HTTP/1.1 request to a running gateway's admin listener, for the CLI
// commands that act on it (`hengshi edge promote | rollback | status`). Plain http only: the
// admin listener is on loopback or a private network (server.admin_listen).
#pragma once

#include <chrono>
#include <string>

#include "core/result.h"

namespace hengshi::cli {

struct AdminReply {
  int status = 0;
  std::string body;
};

// `admin` is "http://HOST:PORT" or "HOST:PORT"; `token` "" sends no Authorization. Errors:
// invalid_argument (the address), admin_unreachable (connect, read or the timeout).
Result<AdminReply> admin_call(const std::string& admin, const std::string& method, const std::string& target,
                              const std::string& body, const std::string& token, std::chrono::seconds timeout);

}  // namespace hengshi::cli
