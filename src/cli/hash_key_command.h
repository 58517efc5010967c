// `hengshi hash-key < key.txt`: reads a client key on stdin (one line; the trailing newline is
// not part of it) and prints the `sha256: <hex>` line for the keys file (server.keys_file), so
// the key itself never has to be written into any file.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_hash_key_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
