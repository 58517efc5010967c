#include "cli/serve_command.h"

#include "chain/cloud_probe.h"
#include "chain/offline_mode.h"

#include <sys/resource.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <iostream>
#include <thread>
#include <vector>

#include <boost/asio/ssl.hpp>
#include <spdlog/spdlog.h>

#include "cloud/cloud_pool.h"
#include "cloud/response_budget.h"
#include "cloud/tls_context.h"
#include "cache/answer_cache.h"
#include "cache/ngram_embedder.h"
#include "cache/redis_tier.h"
#include "core/asio.h"
#include "core/config.h"
#include "edge/edge_engines.h"
#include "edge/intent_embedder.h"
#ifdef HENGSHI_HAVE_LLAMA
#include "edge/llm_embedder.h"
#endif
#include "obs/request_log.h"
#include "router/router.h"
#include "server/gateway_access.h"
#include "server/gateway_handler.h"
#include "server/http_server.h"
#include "server/server_metrics.h"

namespace hengshi::cli {
namespace {

// The answer cache of the config (null when cache.enabled is false), with its embedder: the
// character n-gram one, the intent model's fastText vectors, or a GGUF embedding model.
Result<std::unique_ptr<cache::AnswerCache>> make_answer_cache(const CacheConfig& config,
                                                             const edge::EdgeEngines& edge) {
  if (!config.enabled) return std::unique_ptr<cache::AnswerCache>();
  auto normalizer = std::make_shared<edge::TextNormalizer>();
  cache::TextForms forms;
  forms.normalize = [normalizer](std::string_view text) { return normalizer->normalize(text); };
  forms.canonical = [normalizer](std::string_view text) { return normalizer->to_model_input(text); };
  std::shared_ptr<const Embedder> embedder;
  if (config.embedder == "ngram") {
    embedder = std::make_shared<cache::NgramEmbedder>(config.ngram_dim, forms.normalize);
  } else if (config.embedder == "fasttext") {
    if (!edge.intent) return Error{"config_invalid", "cache.embedder fasttext needs edge.intent_model"};
    embedder = std::make_shared<edge::IntentEmbedder>(*edge.intent);
  } else {
#ifdef HENGSHI_HAVE_LLAMA
    auto loaded = edge::LlmEmbedder::load(config.embedding_model);
    if (!loaded) return Error{loaded.error().code, "cache.embedding_model: " + loaded.error().message};
    embedder = std::shared_ptr<const Embedder>(std::move(*loaded));
#else
    return Error{"config_invalid", "cache.embedder llama needs a build with llama.cpp (scripts/fetch-llama)"};
#endif
  }
  std::unique_ptr<cache::RedisTier> redis;
  if (!config.redis.host.empty()) redis = std::make_unique<cache::RedisTier>(config.redis);
  spdlog::info("answer cache: exact{} ({}), hot {} / cold {} entries{}", config.semantic ? " + semantic" : "",
               embedder->name(), config.hot.max_entries, config.cold.max_entries,
               config.redis.host.empty() ? "" : ", Redis " + config.redis.host + ":" + std::to_string(config.redis.port));
  return std::make_unique<cache::AnswerCache>(config, std::move(embedder), std::move(forms), std::move(redis));
}


// Many idle keep-alive clients need many descriptors: use the hard limit the system allows.
void raise_open_files_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) spdlog::warn("cannot raise the open files limit");
}

// Ends the process when a graceful shutdown takes longer than it should (the io_context did not
// run out of work: some peer or engine ignored cancellation). Runs on its own thread because
// the io_context's threads are the ones that may be stuck.
class ShutdownWatchdog {
 public:
  ~ShutdownWatchdog() { disarm(); }
  void arm(std::chrono::milliseconds grace, std::function<void()> before_exit) {
    std::lock_guard lock(mutex_);
    if (thread_.joinable()) return;
    thread_ = std::thread([this, grace, before_exit = std::move(before_exit)] {
      std::unique_lock lock(mutex_);
      if (cv_.wait_for(lock, grace, [this] { return done_; })) return;
      spdlog::error("shutdown did not finish within {} ms of cancelling; exiting now", grace.count());
      before_exit();
      std::_Exit(1);
    });
  }
  void disarm() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Free functions, not lambdas: a lambda coroutine's captures die with the lambda object, before
// the coroutine ends.
awaitable<void> reload_on_signal(router::Router& router, server::GatewayAccess& access) {
  (void)co_await router.reload_async("SIGHUP");
  access.reload_keys("SIGHUP");
}

awaitable<void> watch_files(router::Router& router, server::GatewayAccess& access,
                            asio::steady_timer& timer, std::chrono::milliseconds interval,
                            const std::atomic<bool>& stopping) {
  while (!stopping) {
    timer.expires_after(interval);
    beast::error_code ec;
    co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || stopping) co_return;
    co_await router.reload_if_changed_async();
    access.poll_keys();
  }
}

}  // namespace

int run_serve(const ServeOptions& options) {
  Result<Config> loaded = options.config_path.empty() ? Result<Config>(default_config())
                                                      : load_config_file(options.config_path);
  if (!loaded) {
    spdlog::error("refusing to start: {}", loaded.error().message);
    return 2;
  }
  Config config = std::move(*loaded);
  if (!options.listen.empty()) config.server.listen = options.listen;
  if (options.admin_listen) config.server.admin_listen = *options.admin_listen;
  if (options.threads >= 0) config.server.threads = options.threads;
  if (options.intent_model) config.edge.intent_model = *options.intent_model;
  if (options.llm_model) config.edge.llm.model_path = *options.llm_model;
  if (options.edge_required) config.edge.required = true;
  if (auto valid = validate_config(config); !valid) {
    spdlog::error("refusing to start: {}", valid.error().message);
    return 2;
  }

  if (config.server.drain_timeout_ms < config.server.default_deadline_ms) {
    spdlog::warn("server.drain_timeout_ms ({}) is shorter than server.default_deadline_ms ({}): a restart "
                 "cuts requests that run on the default budget",
                 config.server.drain_timeout_ms, config.server.default_deadline_ms);
  }
  raise_open_files_limit();

  // Destruction order is the reverse of this order, and it matters: the io_context is created
  // first so that it is destroyed last, after every object whose sockets, timers or coroutine
  // frames belong to it (server, handler, pools). Shutdown runs the io_context out of work
  // before any of them is destroyed (see the SIGTERM handler below).
  const int threads = config.server.threads > 0
                          ? config.server.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  asio::io_context io(threads);

  obs::RequestLog::Options log_options;
  log_options.rotate_bytes = config.log.rotate_bytes;
  log_options.rotate_age = std::chrono::seconds(config.log.rotate_age_s);
  log_options.keep = config.log.keep;
  auto request_log = obs::RequestLog::open(config.log.requests, log_options);
  if (!request_log) {
    spdlog::error("refusing to start: {}", request_log.error().message);
    return 2;
  }

  // The edge loads before the port opens. A configured model that cannot load leaves the gateway
  // cloud-only — loudly: logged, counted and in /readyz — or, with edge.required, stops it.
  auto edge = edge::load_edge_engines(config.edge);
  std::string edge_failure;
  if (!edge) {
    if (config.edge.required) {
      spdlog::error("refusing to start: {}: {} (edge.required)", config.source, edge.error().message);
      return 2;
    }
    edge_failure = edge.error().message;
    spdlog::error("edge unavailable, serving from the cloud only: {}: {}", config.source, edge_failure);
    edge = edge::EdgeEngines{};
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

  // One client TLS context (TLS 1.2+, system CAs, verification on) for the https members that
  // need nothing special, and one response budget shared by every pool (cloud.*).
  auto tls = cloud::make_client_tls_context();
  if (!tls) {
    spdlog::error("refusing to start: {}", tls.error().message);
    return 2;
  }
  auto response_budget =
      std::make_shared<cloud::ResponseBudget>(config.cloud.max_in_flight_response_bytes);

  std::vector<std::unique_ptr<cloud::CloudPool>> pools;
  std::map<std::string, cloud::CloudPool*> pools_by_name;
  for (const auto& pool_config : config.pools) {
    auto pool = cloud::CloudPool::create(pool_config, *tls, response_budget, config.chain);
    if (!pool) {
      spdlog::error("refusing to start: {}: pools.{}: {}", config.source, pool_config.name,
                    pool.error().message);
      return 2;
    }
    // One I/O thread runs every cloud call: a call's time limit can stay on its connection.
    if (threads == 1) {
      for (const auto& member : (*pool)->members()) member->reuse_call_timers(true);
    }
    pools_by_name[pool_config.name] = pool->get();
    pools.push_back(std::move(*pool));
  }

  // Client keys and the admin listener (issue 8 §2): a bad keys file or a missing admin token
  // refuses to start before any port opens.
  auto access = server::GatewayAccess::create(config.server, **router);
  if (!access) {
    spdlog::error("refusing to start: {}: {}", config.source, access.error().message);
    return 2;
  }
  // Offline mode: consecutive cloud connect failures switch plans to the edge; a background probe
  // switches back when a member answers again.
  chain::OfflineMode offline(config.chain.offline);
  if (!edge_failure.empty()) {
    offline.set_edge_available(false, "failed to load: " + edge_failure);
  } else if (!edge->intent && !edge->llm) {
    offline.set_edge_available(false, "no edge engine configured");
  }
  // The answer cache: a bad embedding model refuses to start, like any configured engine.
  auto answer_cache = make_answer_cache(config.cache, *edge);
  if (!answer_cache) {
    spdlog::error("refusing to start: {}: {}", config.source, answer_cache.error().message);
    return 2;
  }
  server::GatewayHandler handler(config, pools_by_name, *edge, **router, **request_log);
  server::HttpServer http_server(io, config.server, handler);
  handler.attach(&http_server);
  http_server.report_in_flight_to(&server::ServerMetrics::in_flight());
  handler.use_keys((*access)->keys());
  handler.use_offline_mode(&offline);
  handler.use_cache(answer_cache->get());
  if (*answer_cache && (*answer_cache)->redis() != nullptr) {
    handler.use_fleet_limits(&(*answer_cache)->redis()->client(), config.cache.redis.fleet_size);
  }
  (*access)->use_cache(answer_cache->get());
  (*access)->use_edge(edge->control.get());
  if (*answer_cache) (*answer_cache)->start();
  auto endpoint = http_server.start();
  if (!endpoint) {
    spdlog::error("refusing to start: {}", endpoint.error().message);
    return 2;
  }
  auto admin_endpoint = (*access)->start_admin(io);
  if (!admin_endpoint) {
    spdlog::error("refusing to start: {}", admin_endpoint.error().message);
    return 2;
  }

  // The gateway's own background work — signals, the files watcher, the offline probe — runs on
  // one strand. With several I/O threads, a coroutine spawned on the bare io_context may resume
  // on one thread while a handler of its timer or stream (beast's timeouts) runs on another, and
  // the SIGTERM handler below cancels their timers: a strand makes all of that sequential.
  auto control = asio::make_strand(io);

  // Policy and keys hot reload: SIGHUP, and a poll of the files (size + mtime, stable over two
  // polls). The policy is parsed on the router's reload thread, never on an I/O thread.
  std::atomic<bool> stopping{false};
  asio::signal_set hangup(control, SIGHUP);
  std::function<void()> wait_hangup = [&] {
    hangup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec || stopping) return;
      asio::co_spawn(control, reload_on_signal(**router, **access), asio::detached);
      wait_hangup();
    });
  };
  wait_hangup();
  asio::steady_timer watch(control);
  if (config.routing.watch_interval_ms > 0) {
    asio::co_spawn(control,
                   watch_files(**router, **access, watch,
                               std::chrono::milliseconds(config.routing.watch_interval_ms), stopping),
                   asio::detached);
  }

  // Shutdown: drain, then cancel what is left and let the io_context run out of work, so that
  // no coroutine is still suspended when the objects it uses are destroyed. A watchdog ends the
  // process if that does not happen in time (a stuck peer must not keep a restart waiting).
  auto probe_stopping = std::make_shared<std::atomic<bool>>(false);
  asio::steady_timer probe_timer(control);
  if (config.chain.offline.enabled) {
    std::vector<cloud::UpstreamClient*> members;
    for (const auto& pool : pools) {
      for (const auto& member : pool->members()) members.push_back(member.get());
    }
    asio::co_spawn(control, chain::probe_while_offline(offline, members, probe_timer, config.chain.offline.probe_interval_ms,
                                             probe_stopping),
                   asio::detached);
  }

  ShutdownWatchdog watchdog;
  asio::signal_set signals(control, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int signal_number) {
    if (ec) return;
    spdlog::info("signal {}: draining {} in-flight request(s), up to {} ms", signal_number,
                 http_server.in_flight(), config.server.drain_timeout_ms);
    stopping = true;
    probe_stopping->store(true);
    probe_timer.cancel();
    hangup.cancel();
    watch.cancel();
    (*access)->stop();
    handler.stop_background();  // shadows in flight end now: they must not hold up the exit
    http_server.drain([&](bool clean) {
      spdlog::info(clean ? "drained; exiting" : "drain timeout passed; cancelling the requests still in flight");
      http_server.close_all();
      // Pooled upstream connections: one may hold a pending wait on its call timer.
      for (const auto& pool : pools) {
        for (const auto& member : pool->members()) member->close_idle();
      }
      watchdog.arm(std::chrono::seconds(5), [&] { (*request_log)->flush(); });
    });
  });

  std::string host = endpoint->address().to_string();
  if (endpoint->address().is_v6()) host = "[" + host + "]";
  spdlog::info("config: {}; pools: {}; threads: {}", config.source, pools.size(), threads);
  // On stderr with the logs: stdout carries only data (the request log, when it goes there).
  // Each line in one write (stderr is unbuffered), so a reader never sees half a port.
  std::string ready = "hengshi listening on http://" + host + ":" + std::to_string(endpoint->port()) + "\n";
  if (*admin_endpoint) ready += "hengshi admin listening on " + server::url_of(**admin_endpoint) + "\n";
  std::cerr << ready << std::flush;

  std::vector<std::thread> workers;
  for (int i = 1; i < threads; ++i) workers.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& worker : workers) worker.join();
  watchdog.disarm();
  (*request_log)->flush();
  return 0;
}

void add_serve_command(CLI::App& app, int& exit_code) {
  auto options = std::make_shared<ServeOptions>();
  CLI::App* serve = app.add_subcommand("serve", "Run the gateway (embedded defaults without --config)");
  serve->add_option("--config", options->config_path, "YAML config file")->check(CLI::ExistingFile);
  serve->add_option("--listen", options->listen, "HOST:PORT to listen on (overrides server.listen)");
  serve->add_option("--admin-listen", options->admin_listen,
                    "HOST:PORT for /metrics and /admin/* (overrides server.admin_listen; \"\" = none)");
  serve->add_option("--threads", options->threads, "I/O threads (overrides server.threads; 0 = all cores)");
  serve->add_option("--intent-model", options->intent_model,
                    "intent model directory from `hengshi train` (overrides edge.intent_model)");
  serve->add_option("--llm-model", options->llm_model, "GGUF file (overrides edge.llm.model_path)");
  serve->add_flag("--edge-required", options->edge_required,
                  "refuse to start when a configured edge model cannot load (sets edge.required)");
  serve->callback([options, &exit_code] { exit_code = run_serve(*options); });
}

}  // namespace hengshi::cli
