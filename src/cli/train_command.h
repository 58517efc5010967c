// `hengshi train`: trains a versioned intent model directory from JSON Lines rows
// {"text", "intent", "answer"?} (edge/intent_trainer.h) and prints what it measured.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_train_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
