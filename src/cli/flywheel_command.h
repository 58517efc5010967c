// `hengshi flywheel export --log FILE [--log FILE ...] --out FILE.jsonl [--review-sample 0.05]
//  [--seed N] [--policy FILE]`: good cloud answers from the request log become training rows,
// with a review sample for a person (edge/flywheel.h says which rows and why).
#pragma once

#include <CLI/CLI.hpp>

namespace hengshi::cli {

void add_flywheel_command(CLI::App& app, int& exit_code);

}  // namespace hengshi::cli
