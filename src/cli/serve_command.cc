#include "cli/serve_command.h"

#include <functional>
#include <iostream>
#include <thread>
#include <vector>

#include <boost/asio/ssl.hpp>
#include <spdlog/spdlog.h>

#include "cloud/cloud_pool.h"
#include "core/asio.h"
#include "core/config.h"
#include "edge/edge_engines.h"
#include "obs/request_log.h"
#include "router/router.h"
#include "server/gateway_handler.h"
#include "server/http_server.h"

namespace hengshi::cli {

int run_serve(const ServeOptions& options) {
  Result<Config> loaded = options.config_path.empty() ? Result<Config>(default_config())
                                                      : load_config_file(options.config_path);
  if (!loaded) {
    spdlog::error("refusing to start: {}", loaded.error().message);
    return 2;
  }
  Config config = std::move(*loaded);
  if (!options.listen.empty()) config.server.listen = options.listen;
  if (options.threads >= 0) config.server.threads = options.threads;
  if (options.intent_model) config.edge.intent_model = *options.intent_model;
  if (options.llm_model) config.edge.llm.model_path = *options.llm_model;
  if (auto valid = validate_config(config); !valid) {
    spdlog::error("refusing to start: {}", valid.error().message);
    return 2;
  }

  auto request_log = obs::RequestLog::open(config.log.requests);
  if (!request_log) {
    spdlog::error("refusing to start: {}", request_log.error().message);
    return 2;
  }

  // The edge loads before the port opens: a gateway that cannot load a configured model refuses
  // to start instead of quietly sending everything to the cloud.
  auto edge = edge::load_edge_engines(config.edge);
  if (!edge) {
    spdlog::error("refusing to start: {}: {}", config.source, edge.error().message);
    return 2;
  }
  if (edge->intent) {
    spdlog::info("edge intent model: {} ({} intents) from {}", edge->intent->model_version(),
                 edge->intent->labels().size(), config.edge.intent_model);
  }
  if (edge->llm) spdlog::info("edge LLM: {}", edge->llm_model_id());

  auto router = router::Router::create(config);
  if (!router) {
    spdlog::error("refusing to start: {}", router.error().message);
    return 2;
  }
  spdlog::info("routing policy {} ({}{})", (*router)->policy()->version, (*router)->policy()->source,
               config.routing.thresholds_file.empty() ? "" : ", thresholds " + config.routing.thresholds_file);

  auto tls = std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client);
  tls->set_default_verify_paths();
  tls->set_verify_mode(asio::ssl::verify_peer);

  std::vector<std::unique_ptr<cloud::CloudPool>> pools;
  std::map<std::string, cloud::CloudPool*> pools_by_name;
  for (const auto& pool_config : config.pools) {
    auto pool = cloud::CloudPool::create(pool_config, tls);
    if (!pool) {
      spdlog::error("refusing to start: {}: pools.{}: {}", config.source, pool_config.name,
                    pool.error().message);
      return 2;
    }
    pools_by_name[pool_config.name] = pool->get();
    pools.push_back(std::move(*pool));
  }

  const int threads = config.server.threads > 0
                          ? config.server.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  asio::io_context io(threads);
  server::GatewayHandler handler(config, pools_by_name, *edge, **router, **request_log);
  server::HttpServer http_server(io, config.server, handler);
  handler.attach(&http_server);
  auto endpoint = http_server.start();
  if (!endpoint) {
    spdlog::error("refusing to start: {}", endpoint.error().message);
    return 2;
  }

  // Policy hot reload: SIGHUP, and a poll of the files' modification times.
  asio::signal_set hangup(io, SIGHUP);
  std::function<void()> wait_hangup = [&] {
    hangup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      (void)(*router)->reload("SIGHUP");
      wait_hangup();
    });
  };
  wait_hangup();
  asio::steady_timer watch(io);
  std::function<void()> schedule_watch = [&] {
    if (config.routing.watch_interval_ms <= 0) return;
    watch.expires_after(std::chrono::milliseconds(config.routing.watch_interval_ms));
    watch.async_wait([&](const boost::system::error_code& ec) {
      if (ec) return;
      (*router)->reload_if_changed();
      schedule_watch();
    });
  };
  schedule_watch();

  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal_number) {
    if (ec) return;
    spdlog::info("signal {}: draining {} in-flight request(s), up to {} ms", signal_number,
                 http_server.in_flight(), config.server.drain_timeout_ms);
    hangup.cancel();
    watch.cancel();
    http_server.drain([&io](bool clean) {
      spdlog::info(clean ? "drained; exiting" : "drain timeout passed; exiting with requests in flight");
      io.stop();
    });
  });

  std::string host = endpoint->address().to_string();
  if (endpoint->address().is_v6()) host = "[" + host + "]";
  spdlog::info("config: {}; pools: {}; threads: {}", config.source, pools.size(), threads);
  std::cout << "hengshi listening on http://" << host << ":" << endpoint->port() << std::endl;

  std::vector<std::thread> workers;
  for (int i = 1; i < threads; ++i) workers.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& worker : workers) worker.join();
  (*request_log)->flush();
  return 0;
}

void add_serve_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* serve = app.add_subcommand("serve", "Run the gateway (embedded defaults without --config)");
  serve->add_option("--config", options->config_path, "YAML config file")->check(CLI::ExistingFile);
  serve->add_option("--listen", options->listen, "HOST:PORT to listen on (overrides server.listen)");
  serve->add_option("--threads", options->threads, "I/O threads (overrides server.threads; 0 = all cores)");
  serve->add_option("--intent-model", options->intent_model,
                    "intent model directory from `hengshi train` (overrides edge.intent_model)");
  serve->add_option("--llm-model", options->llm_model, "GGUF file (overrides edge.llm.model_path)");
  serve->callback([options, &exit_code] { exit_code = run_serve(*options); });
}

}  // namespace hengshi::cli
