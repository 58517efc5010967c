// `hengshi calibrate`: runs an intent model over labelled JSON Lines rows
// {"text", "intent", "task_type"?}, fits the confidence bands per task type and intent
// (router/calibrate.h), prints the fit table and writes the versioned thresholds file.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_calibrate_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
