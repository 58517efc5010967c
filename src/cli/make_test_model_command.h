// `hengshi make-test-model`: writes a tiny random-weight GGUF of a real architecture with a real
// tokenizer (edge/llm_test_model.h), so the edge LLM path can run without downloading a model.
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_make_test_model_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
