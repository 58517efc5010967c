// How a subcommand reports bad input: one line on stderr, prefixed with the command's name so a
// script's log says which step failed, and exit code 2.
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace hengshi::cli {

inline int command_failed(std::string_view command, const std::string& message) {
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(command.size()), command.data(),
               message.c_str());
  return 2;
}

}  // namespace hengshi::cli
