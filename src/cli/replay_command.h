// `hengshi replay --log FILE [--log FILE ...] [--model DIR] [--thresholds FILE] [--labels FILE]
//  [--target-precision P] [--json]`: the weekly recalibration loop, offline. Logged requests
// (with log.text on) are re-run through a candidate intent model and thresholds; the report
// (obs/replay.h) goes to stdout, as tables or, with --json, one JSON object.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_replay_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
