// `hengshi finetune`: fine-tunes the edge LLM on chat or FAQ rows (edge/llm_finetune.h) and
// writes a LoRA adapter or a full model directory with its manifest.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_finetune_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
