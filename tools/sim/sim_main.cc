// hengshi-sim: an OpenAI-compatible upstream simulator for tests and benchmarks.
//   hengshi-sim --listen HOST:PORT [--profile FILE] [--seed N] [--threads N] [--name NAME]
// Once listening it prints exactly one line, "hengshi-sim listening on http://HOST:PORT", and
// flushes stdout; with port 0 that line is how a caller learns the real port.
// SIGTERM / SIGINT stop it at once with exit status 0.
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/asio.h"
#include "sim/listen_address.h"
#include "sim/profile.h"
#include "sim/sim_server.h"

int main(int argc, char** argv) {
  namespace sim = hengshi::sim;

  CLI::App app{"hengshi-sim: OpenAI-compatible upstream simulator (latency, pacing, faults)"};
  std::string listen = "127.0.0.1:9101";
  std::string profile_path;
  std::optional<std::uint64_t> seed;
  int threads = 1;
  std::string name = "sim";
  app.add_option("--listen", listen, "HOST:PORT to listen on; port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--profile", profile_path, "profile file (YAML, or JSON if it ends in .json)");
  app.add_option("--seed", seed, "seed for reproducible draws (default: random)");
  app.add_option("--threads", threads, "I/O threads")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  app.add_option("--name", name, "name echoed in X-Sim-Name and the response's \"sim\" object")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  sim::Profile profile;
  if (!profile_path.empty()) {
    auto loaded = sim::load_profile_file(profile_path);
    if (!loaded) {
      std::cerr << "hengshi-sim: " << loaded.error().message << "\n";
      return 2;
    }
    profile = std::move(*loaded);
  }
  auto endpoint = sim::resolve_listen_address(listen);
  if (!endpoint) {
    std::cerr << "hengshi-sim: " << endpoint.error().message << "\n";
    return 2;
  }

  sim::SimOptions options;
  options.name = name;
  options.seed = seed ? *seed : std::random_device{}();

  hengshi::asio::io_context io(threads);
  sim::SimServer server(io, options, std::move(profile));
  auto bound = server.listen(*endpoint);
  if (!bound) {
    std::cerr << "hengshi-sim: " << bound.error().message << "\n";
    return 1;
  }

  hengshi::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&io](const boost::system::error_code&, int) { io.stop(); });

  std::cout << "hengshi-sim listening on " << sim::endpoint_url(*bound) << std::endl;

  std::vector<std::thread> workers;
  for (int i = 1; i < threads; ++i) workers.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& worker : workers) worker.join();
  return 0;
}
