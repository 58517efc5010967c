#include "cli/route_command.h"

#include "core/budget.h"
#include "core/response_meta.h"

#include "core/json_text.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "core/chat_request.h"
#include "core/config.h"
#include "edge/intent_engine.h"
#include "router/router.h"

namespace hengshi::cli {
namespace {

using nlohmann::json;

struct RouteArgs {
  std::string config_path;
};

// One input line → a ChatRequest: {"text"} or a full chat request, with optional top-level
// task_type / session_id / deadline_ms (a chat request's own "hengshi" object also works).
Result<ChatRequest, ApiError> request_of(const std::string& line) {
  json row = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (row.is_discarded() || !row.is_object()) {
    return ApiError::invalid_request("invalid_json", "line is not a JSON object");
  }
  json body;
  if (row.contains("messages")) {
    body = row;
    body.erase("task_type");
    body.erase("session_id");
    body.erase("deadline_ms");
    if (!body.contains("model")) body["model"] = "auto";
  } else if (row.contains("text") && row["text"].is_string()) {
    body = {{"model", row.value("model", "auto")},
            {"messages", json::array({{{"role", "user"}, {"content", row["text"]}}})}};
  } else {
    return ApiError::invalid_request("missing_text", "line needs \"text\" (a string) or \"messages\"");
  }
  auto parsed = parse_chat_request(body.dump());
  if (!parsed) return parsed.error();
  if (row.contains("task_type") && row["task_type"].is_string()) parsed->hengshi.task_type = row["task_type"];
  if (row.contains("session_id") && row["session_id"].is_string()) parsed->hengshi.session_id = row["session_id"];
  if (row.contains("deadline_ms")) {
    if (!row["deadline_ms"].is_number_integer()) {
      return ApiError::invalid_request("invalid_value", "deadline_ms must be an integer (milliseconds)", "deadline_ms");
    }
    parsed->hengshi.deadline_ms = row["deadline_ms"].get<std::int64_t>();
  }
  return parsed;
}

int run_route(const RouteArgs& args) {
  Result<Config> loaded = args.config_path.empty() ? Result<Config>(default_config())
                                                   : load_config_file(args.config_path);
  if (!loaded) {
    std::fprintf(stderr, "hengshi route: %s\n", loaded.error().message.c_str());
    return 2;
  }
  const Config& config = *loaded;
  std::unique_ptr<edge::IntentEngine> intent;
  if (!config.edge.intent_model.empty()) {
    auto engine = edge::IntentEngine::load(config.edge.intent_model);
    if (!engine) {
      std::fprintf(stderr, "hengshi route: edge.intent_model: %s\n", engine.error().message.c_str());
      return 2;
    }
    intent = std::move(*engine);
  }
  auto router = router::Router::create(config);
  if (!router) {
    std::fprintf(stderr, "hengshi route: %s\n", router.error().message.c_str());
    return 2;
  }
  std::vector<std::string> pools;
  for (const auto& pool : config.pools) pools.push_back(pool.name);
  const auto policy = (*router)->policy();
  std::fprintf(stderr, "hengshi route: policy %s, intent model %s\n", policy->version.c_str(),
               intent ? intent->model_version().c_str() : "(none)");

  std::string line;
  std::size_t number = 0, errors = 0;
  while (std::getline(std::cin, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json out = {{"line", number}};
    auto request = request_of(line);
    if (!request) {
      ++errors;
      out["error"] = request.error().to_json()["error"];
      std::cout << dump_text(out) << '\n';
      continue;
    }
    // Dry run: the whole budget is left (no time passes between arrival and decision).
    const Budget budget = Budget::after(Millis(request->hengshi.deadline_ms.value_or(config.server.default_deadline_ms)),
                                        config.chain.shares_for(request->hengshi.task_type));
    router::RouteInput input = router::route_input(*request, budget);
    edge::IntentPrediction prediction;
    if (intent) {
      prediction = intent->predict(input.last_user_text);
      input.prediction = &prediction;
    }
    input.llm_available = !config.edge.llm.model_path.empty();
    input.default_pool = config.routing.default_pool;
    input.pools = pools;
    Decision decision = (*router)->decide(input, *policy);
    auto or_null = [](std::string_view s) { return s.empty() ? json(nullptr) : json(std::string(s)); };
    out["route"] = to_string(decision.route);
    out["reason"] = to_string(decision.reason);
    out["intent"] = or_null(decision.intent);
    out["confidence"] = decision.confidence ? json(*decision.confidence) : json(nullptr);
    out["fallback_type"] = or_null(to_string(decision.fallback_type));
    out["edge_engine"] = or_null(to_string(decision.edge_engine));
    out["plan"] = to_json(decision.plan);
    out["figures"] = decision.figures;
    std::cout << out.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  }
  std::fprintf(stderr, "hengshi route: %zu line(s), %zu error(s)\n", number, errors);
  return 0;
}

}  // namespace

void add_route_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<RouteArgs>();
  CLI::App* route = app.add_subcommand(
      "route", "Dry-run the router: JSON Lines requests on stdin, one decision per line on stdout");
  route->add_option("--config", args->config_path, "YAML config (routing, edge, pools); default: embedded")
      ->check(CLI::ExistingFile);
  route->callback([args, &exit_code] { exit_code = run_route(*args); });
}

}  // namespace hengshi::cli
