// `hengshi edge ...`: the edge LLM's lifecycle tools. `edge gate` compares a fine-tuned candidate
// with the serving baseline on a fixed regression set (edge/llm_gate.h).
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_edge_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
