// `hengshi route --config FILE < requests.jsonl > decisions.jsonl`: an offline dry run of
// exactly the server's decide() (no upstream calls, no generation), one decision per input line.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_route_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
