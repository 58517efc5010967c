// `hengshi train-complexity`: trains a versioned complexity model directory from JSON Lines rows
// {"text", "small_correct", ...} (router/complexity_trainer.h), with the cut fitted for a target
// share of large-model calls, and prints what it measured.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_train_complexity_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
