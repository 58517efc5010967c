// `hengshi serve`: loads the config (embedded defaults when no file), builds the pools and the
// HTTP server, serves until SIGTERM/SIGINT, then drains in-flight requests and exits.
#pragma once

#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace hengshi::cli {

struct ServeOptions {
  std::string config_path;
  std::string listen;  // overrides server.listen
  std::optional<std::string> admin_listen;  // overrides server.admin_listen ("" = none)
  int threads = -1;    // overrides server.threads when >= 0
  std::optional<std::string> intent_model;  // overrides edge.intent_model ("" turns it off)
  std::optional<std::string> llm_model;     // overrides edge.llm.model_path
  bool edge_required = false;               // sets edge.required
};

void add_serve_command(CLI::App& app, int& exit_code);
int run_serve(const ServeOptions& options);

}  // namespace hengshi::cli
