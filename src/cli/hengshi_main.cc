// hengshi: the gateway binary. Each subcommand lives in its own src/cli/*_command.cc.
#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <memory>

#include "cli/calibrate_command.h"
#include "cli/flywheel_command.h"
#include "cli/hash_key_command.h"
#include "cli/edge_command.h"
#include "cli/finetune_command.h"
#include "cli/make_test_model_command.h"
#include "cli/replay_command.h"
#include "cli/route_command.h"
#include "cli/serve_command.h"
#include "cli/train_command.h"
#include "cli/train_complexity_command.h"

int main(int argc, char** argv) {
  // Logs go to stderr in every command: stdout is for data (route's JSON Lines, serve's request
  // log and ready line), which a pipe to jq must be able to parse.
  auto& sinks = spdlog::default_logger()->sinks();
  sinks.clear();
  sinks.push_back(std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
  CLI::App app{"hengshi — hybrid edge-cloud inference gateway"};
  app.require_subcommand(1);
  int exit_code = 0;
  hengshi::cli::add_serve_command(app, exit_code);
  hengshi::cli::add_train_command(app, exit_code);
  hengshi::cli::add_train_complexity_command(app, exit_code);
  hengshi::cli::add_calibrate_command(app, exit_code);
  hengshi::cli::add_make_test_model_command(app, exit_code);
  hengshi::cli::add_finetune_command(app, exit_code);
  hengshi::cli::add_edge_command(app, exit_code);
  hengshi::cli::add_route_command(app, exit_code);
  hengshi::cli::add_replay_command(app, exit_code);
  hengshi::cli::add_flywheel_command(app, exit_code);
  hengshi::cli::add_hash_key_command(app, exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
