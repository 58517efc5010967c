#include "cli/hash_key_command.h"

#include <iostream>
#include <string>

#include "server/key_store.h"

namespace hengshi::cli {
namespace {

int run_hash_key() {
  std::string key;
  std::getline(std::cin, key);
  if (!key.empty() && key.back() == '\r') key.pop_back();
  if (key.empty()) {
    std::cerr << "hash-key: no key on stdin (e.g. `printf %s \"$KEY\" | hengshi hash-key`)\n";
    return 2;
  }
  std::cout << "sha256: " << server::to_hex(server::sha256(key)) << "\n";
  return 0;
}

}  // namespace

void add_hash_key_command(CLI::App& app, int& exit_code) {
  CLI::App* command = app.add_subcommand(
      "hash-key", "Read a client key on stdin and print its sha256 line for server.keys_file");
  command->callback([&exit_code] { exit_code = run_hash_key(); });
}

}  // namespace hengshi::cli
