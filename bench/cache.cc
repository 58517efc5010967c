// bench_cache: the answer cache's precision and speed.
//
//   bench_cache [--data DIR] [--section precision|speed|all] [--entries 100000] [--quick]
//               [--one-cpu N] [--build-dir DIR] [--source-dir DIR]
//
// Precision, on ../shared/data/atec_ccks_dev_pairs.jsonl (Chinese customer-service question pairs,
// label 1 = same meaning; skipped cleanly when absent): for each pair, `a` is cached and `b` asked.
// For each embedder and a sweep of thresholds, with the hit guards on and off, it prints the hit
// rate on label-1 pairs (paraphrases found), the false-hit rate on label-0 pairs and the precision
// of the hits at the data's own mix. The baseline, in the same run, is the character n-gram cosine
// without guards; the comparison is made at the false-hit rate of 1%: the paraphrases the baseline
// finds at its strictest threshold that keeps 1%, against what the default configuration (the
// default embedder and threshold, guards on) finds.
//
// Speed, through the HTTP API: a gateway in front of hengshi-sim is filled with --entries answers,
// then exact hits, semantic hits and direct calls to the sim (the baseline, same run, same client)
// are timed one at a time on keep-alive connections; the gateway's RSS before and after the fill
// gives the memory per 100k entries. The same again with the Redis tier (a redis-server started
// here on loopback). Then the same exact hit, and the same question to the sim, in a closed loop
// on 4 connections for 3 s each: requests per second, and their ratio. Everything stops by itself.
//
// Placement: on a VM, a wake-up across CPUs costs tens of microseconds each way, and the scheduler
// puts a one-thread sim on the client's CPU more often than the gateway's I/O thread, so a free
// run compares placements as much as code. --one-cpu N runs the client, the sim, the gateway and
// Redis on CPU N alone: both sides pay the same context switches, none pays a cross-CPU wake-up.
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cache/hit_guards.h"
#include "core/cache_config.h"
#include "cache/ngram_embedder.h"
#include "edge/intent_embedder.h"
#include "edge/intent_engine.h"
#include "edge/text_normalizer.h"
#include "support/child_process.h"
#include "support/http_client.h"
#include "support/raw_socket.h"
#include "support/redis_server.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using hengshi::testing::ChildProcess;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string data_dir;
  std::string section = "all";
  int entries = 100'000;
  bool quick = false;
  int one_cpu = -1;  // speed: every process on this CPU alone (-1: the scheduler places them)
  std::string build_dir;
  std::string source_dir;
};

// ---------------------------------------------------------------------------------------------
// Precision.
struct Pair {
  std::string a;
  std::string b;
  bool same = false;
};

std::vector<Pair> read_pairs(const std::string& path) {
  std::vector<Pair> pairs;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const json row = json::parse(line, nullptr, false);
    if (!row.is_object() || !row.contains("a") || !row.contains("b")) continue;
    pairs.push_back({row["a"].get<std::string>(), row["b"].get<std::string>(), row.value("label", 0) == 1});
  }
  return pairs;
}

struct Scored {
  float cosine = 0;
  bool guard_passes = true;
  bool same = false;
};

struct Rates {
  double hit_rate = 0;         // label-1 pairs answered from the cache
  double false_hit_rate = 0;   // label-0 pairs answered from the cache
  double precision = 0;        // right hits / hits, at the data's mix
  std::size_t hits = 0;
};

Rates rates_at(const std::vector<Scored>& scored, double threshold, bool guards) {
  std::size_t same = 0, different = 0, true_hits = 0, false_hits = 0;
  for (const auto& s : scored) {
    (s.same ? same : different) += 1;
    const bool hit = s.cosine >= threshold && (!guards || s.guard_passes);
    if (!hit) continue;
    (s.same ? true_hits : false_hits) += 1;
  }
  Rates out;
  out.hits = true_hits + false_hits;
  out.hit_rate = same ? static_cast<double>(true_hits) / static_cast<double>(same) : 0;
  out.false_hit_rate = different ? static_cast<double>(false_hits) / static_cast<double>(different) : 0;
  out.precision = out.hits ? static_cast<double>(true_hits) / static_cast<double>(out.hits) : 0;
  return out;
}

// The lowest threshold (finest step) whose false-hit rate stays at or under `max_fhr`.
std::pair<double, Rates> best_at_fhr(const std::vector<Scored>& scored, bool guards, double max_fhr) {
  std::pair<double, Rates> best{1.01, Rates{}};
  for (int step = 1000; step >= 0; --step) {
    const double threshold = step / 1000.0;
    const Rates r = rates_at(scored, threshold, guards);
    if (r.false_hit_rate > max_fhr) break;
    best = {threshold, r};
  }
  return best;
}

int run_precision(const Options& options, double default_threshold) {
  const std::string path = options.data_dir + "/atec_ccks_dev_pairs.jsonl";
  if (!fs::exists(path)) {
    std::printf("precision: skip: %s not found\n", path.c_str());
    return 0;
  }
  auto pairs = read_pairs(path);
  if (options.quick && pairs.size() > 2000) pairs.resize(2000);
  std::size_t positives = 0;
  for (const auto& p : pairs) positives += p.same ? 1 : 0;
  std::printf("precision: %zu pairs from %s (%zu same meaning, %zu different); insert a, ask b\n", pairs.size(),
              path.c_str(), positives, pairs.size() - positives);

  const auto normalizer = std::make_shared<hengshi::edge::TextNormalizer>();
  auto normalize = [normalizer](std::string_view text) { return normalizer->normalize(text); };
  struct Candidate {
    std::string name;
    std::shared_ptr<const hengshi::Embedder> embedder;
  };
  std::vector<Candidate> candidates = {
      {"ngram-1024 (default)", std::make_shared<hengshi::cache::NgramEmbedder>(1024, normalize)},
      {"ngram-4096", std::make_shared<hengshi::cache::NgramEmbedder>(4096, normalize)},
  };
  // The demo intent model's fastText vectors, trained here on the shipped FAQ (another domain).
  std::unique_ptr<hengshi::edge::IntentEngine> engine;
  const std::string model_dir = (fs::temp_directory_path() / ("hengshi-bench-cache-model-" + std::to_string(::getpid()))).string();
  auto trained = ChildProcess::run({options.build_dir + "/src/cli/hengshi", "train", "--data",
                                    options.source_dir + "/data/demo_faq.jsonl", "--out", model_dir, "--search-budget", "0"},
                                   std::chrono::seconds(300));
  if (trained.exit_code == 0) {
    if (auto loaded = hengshi::edge::IntentEngine::load(model_dir); loaded) {
      engine = std::move(*loaded);
      candidates.push_back({"fasttext (demo FAQ model)", std::make_shared<hengshi::edge::IntentEmbedder>(*engine)});
    }
  }

  std::vector<Scored> baseline_scores;
  std::printf("\n%-26s %-6s %9s %9s %9s %9s\n", "embedder", "guards", "threshold", "hit-rate", "false-hit", "precision");
  std::map<std::string, std::vector<Scored>> all_scores;
  const auto started = Clock::now();
  for (const auto& candidate : candidates) {
    std::vector<Scored> scored;
    scored.reserve(pairs.size());
    for (const auto& pair : pairs) {
      const std::string a = normalize(pair.a);
      const std::string b = normalize(pair.b);
      auto va = candidate.embedder->embed(a);
      auto vb = candidate.embedder->embed(b);
      Scored s;
      s.same = pair.same;
      s.cosine = va && vb ? hengshi::cosine(*va, *vb) : 0.0f;
      s.guard_passes = !hengshi::cache::guard_rejects(hengshi::cache::guard_features(b), hengshi::cache::guard_features(a));
      scored.push_back(s);
    }
    for (bool guards : {false, true}) {
      for (double threshold : {0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.9}) {
        const Rates r = rates_at(scored, threshold, guards);
        std::printf("%-26s %-6s %9.2f %8.1f%% %8.2f%% %8.1f%%\n", candidate.name.c_str(), guards ? "on" : "off",
                    threshold, 100 * r.hit_rate, 100 * r.false_hit_rate, 100 * r.precision);
      }
      const auto [threshold, r] = best_at_fhr(scored, guards, 0.01);
      std::printf("%-26s %-6s %9.3f %8.1f%% %8.2f%% %8.1f%%   <- lowest threshold with false hits <= 1%%\n",
                  candidate.name.c_str(), guards ? "on" : "off", threshold, 100 * r.hit_rate, 100 * r.false_hit_rate,
                  100 * r.precision);
    }
    all_scores[candidate.name] = std::move(scored);
  }
  std::error_code ec;
  fs::remove_all(model_dir, ec);

  // The guards alone: which share of each label they refuse (whatever the cosine).
  const auto& ngram = all_scores.at("ngram-1024 (default)");
  std::size_t refused_same = 0, refused_different = 0;
  for (const auto& s : ngram) {
    if (!s.guard_passes) (s.same ? refused_same : refused_different) += 1;
  }
  std::printf("\nguards refuse %.1f%% of the different-meaning pairs and %.1f%% of the same-meaning ones\n",
              100.0 * static_cast<double>(refused_different) / static_cast<double>(pairs.size() - positives),
              100.0 * static_cast<double>(refused_same) / static_cast<double>(positives));

  const auto [base_threshold, base] = best_at_fhr(ngram, false, 0.01);
  const Rates chosen = rates_at(ngram, default_threshold, true);
  const auto [guarded_threshold, guarded] = best_at_fhr(ngram, true, 0.01);
  std::printf("\nbaseline (n-gram cosine, no guards) at <= 1%% false hits: threshold %.3f, %.1f%% of paraphrases\n",
              base_threshold, 100 * base.hit_rate);
  std::printf("default (n-gram, guards, threshold %.2f): %.2f%% false hits, %.1f%% of paraphrases, precision %.1f%%\n",
              default_threshold, 100 * chosen.false_hit_rate, 100 * chosen.hit_rate, 100 * chosen.precision);
  std::printf("n-gram with guards at <= 1%% false hits: threshold %.3f, %.1f%% of paraphrases\n", guarded_threshold,
              100 * guarded.hit_rate);
  const double ratio = base.hit_rate > 0 ? chosen.hit_rate / base.hit_rate : 0.0;
  std::printf("target: default false hits <= 1%%: %s (%.2f%%)\n", chosen.false_hit_rate <= 0.01 ? "met" : "NOT met",
              100 * chosen.false_hit_rate);
  std::printf("target: paraphrase hits >= 1.5x the baseline's at the same false-hit rate: %s (%.2fx)\n",
              ratio >= 1.5 ? "met" : "NOT met", ratio);
  std::printf("precision section took %.1f s\n", std::chrono::duration<double>(Clock::now() - started).count());
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Speed.
std::int64_t percentile(std::vector<std::int64_t> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1));
  return values[rank];
}

std::string body_of(const std::string& text, const std::string& model) {
  return json{{"model", model}, {"messages", {{{"role", "user"}, {"content", text}}}}}.dump();
}

// The i-th cached question: distinct texts that share a shape, like a FAQ's many questions.
std::string question(int i) {
  static const char* topics[] = {"refund", "delivery", "invoice", "password", "coupon", "membership", "warranty", "address"};
  return "customer " + std::to_string(i) + " asks about the " + topics[i % 8] + " policy for order " + std::to_string(i * 7);
}

struct Timing {
  std::vector<std::int64_t> exact, semantic, direct;
  std::size_t semantic_misses = 0;
  double exact_rps = 0, direct_rps = 0;  // closed loop, kLoopConnections connections
};

constexpr int kLoopConnections = 4;

// Requests per second over `seconds`, kLoopConnections keep-alive connections each sending
// `body` as soon as its last answer is in (a closed loop; bounded in time).
double closed_loop_rps(int port, const std::string& body, double seconds) {
  std::atomic<long> done{0};
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  const auto started = Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < kLoopConnections; ++c) {
    clients.emplace_back([&] {
      hengshi::testing::HttpConnection connection("127.0.0.1", port);
      while (Clock::now() < until) {
        connection.send({"POST", "/v1/chat/completions", body, "application/json", {}});
        ++done;
      }
    });
  }
  for (auto& client : clients) client.join();
  return static_cast<double>(done) / std::chrono::duration<double>(Clock::now() - started).count();
}

struct SpeedResult {
  long rss_before_kib = 0;
  long rss_after_kib = 0;
  double fill_seconds = 0;
  Timing timing;
};

std::optional<SpeedResult> measure(const Options& options, int sim_port, const std::string& cache_yaml,
                                   const std::string& label) {
  const std::string config = (fs::temp_directory_path() / ("hengshi-bench-cache-" + std::to_string(::getpid()) + ".yaml")).string();
  std::ofstream(config) << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", threads: 1}\n"
                        << "log: {requests: \"\"}\n"
                        << "pools:\n"
                        << "  cloud-small: {members: [{name: s, base_url: \"http://127.0.0.1:" << sim_port
                        << "/v1\", model: sim-small, max_concurrent: 64}]}\n"
                        << "  cloud-large: {members: [{name: l, base_url: \"http://127.0.0.1:" << sim_port
                        << "/v1\", model: sim-large}]}\n"
                        << cache_yaml;
  std::unique_ptr<ChildProcess> gateway;
  try {
    gateway = std::make_unique<ChildProcess>(
        ChildProcess::start({options.build_dir + "/src/cli/hengshi", "serve", "--config", config}));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_cache: the gateway did not start: %s\n", error.what());
    return std::nullopt;
  }
  SpeedResult result;
  result.rss_before_kib = hengshi::testing::resident_kib(gateway->pid());
  // Fill: two connections in parallel, each its half of the questions.
  const auto fill_started = Clock::now();
  std::vector<std::thread> fillers;
  for (int t = 0; t < 2; ++t) {
    fillers.emplace_back([&, t] {
      hengshi::testing::HttpConnection connection("127.0.0.1", gateway->port());
      for (int i = t; i < options.entries; i += 2) {
        connection.send({"POST", "/v1/chat/completions", body_of(question(i), "cloud-small"), "application/json", {}});
      }
    });
  }
  for (auto& filler : fillers) filler.join();
  result.fill_seconds = std::chrono::duration<double>(Clock::now() - fill_started).count();
  result.rss_after_kib = hengshi::testing::resident_kib(gateway->pid());

  // Timed, one request at a time, interleaved: direct to the sim, an exact hit, a semantic hit.
  hengshi::testing::HttpConnection to_gateway("127.0.0.1", gateway->port());
  hengshi::testing::HttpConnection to_sim("127.0.0.1", sim_port);
  const int samples = options.quick ? 300 : 2000;
  auto timed = [](hengshi::testing::HttpConnection& connection, const std::string& body, std::string* cache) {
    const auto started = Clock::now();
    auto reply = connection.send({"POST", "/v1/chat/completions", body, "application/json", {}});
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started).count();
    if (cache) *cache = reply.header("x-hengshi-cache");
    return us;
  };
  for (int k = 0; k < samples; ++k) {
    const int i = static_cast<int>((static_cast<long>(k) * 7919) % options.entries);
    result.timing.direct.push_back(timed(to_sim, body_of(question(i), "sim-small"), nullptr));
    std::string cache;
    const auto exact_us = timed(to_gateway, body_of(question(i), "cloud-small"), &cache);
    if (cache == "exact") result.timing.exact.push_back(exact_us);
    const auto semantic_us = timed(to_gateway, body_of("please, " + question(i) + "?", "cloud-small"), &cache);
    if (cache == "semantic") {
      result.timing.semantic.push_back(semantic_us);
    } else {
      ++result.timing.semantic_misses;
    }
  }
  // Throughput of the same exact hit against the same answer from the sim, one run.
  const double loop_seconds = options.quick ? 1.0 : 3.0;
  result.timing.exact_rps = closed_loop_rps(gateway->port(), body_of(question(1), "cloud-small"), loop_seconds);
  result.timing.direct_rps = closed_loop_rps(sim_port, body_of(question(1), "sim-small"), loop_seconds);
  const json stats = hengshi::testing::http_call("127.0.0.1", gateway->admin_port(),
                                                  {"GET", "/admin/cache/stats", "", "", {}})
                         .json();
  std::printf("%s: %d answers stored in %.1f s; cache holds %d entries (%s)\n", label.c_str(), options.entries,
              result.fill_seconds, stats.value("entries", 0), stats.dump().substr(0, 240).c_str());
  gateway->signal(SIGTERM);
  gateway->wait(std::chrono::seconds(10));
  std::remove(config.c_str());
  return result;
}

void print_speed(const std::string& label, const SpeedResult& r, int entries) {
  auto row = [](const char* what, const std::vector<std::int64_t>& us) {
    std::printf("  %-22s n=%5zu  p50 %6lld us  p99 %6lld us\n", what, us.size(),
                static_cast<long long>(percentile(us, 0.50)), static_cast<long long>(percentile(us, 0.99)));
  };
  std::printf("%s\n", label.c_str());
  row("direct to the sim", r.timing.direct);
  row("exact hit (gateway)", r.timing.exact);
  row("semantic hit (gateway)", r.timing.semantic);
  if (r.timing.semantic_misses) std::printf("  (%zu paraphrases were not semantic hits)\n", r.timing.semantic_misses);
  const double direct_p50 = static_cast<double>(percentile(r.timing.direct, 0.5));
  if (direct_p50 > 0) {
    std::printf("  ratio to a direct sim call, p50: exact %.2fx, semantic %.2fx\n",
                static_cast<double>(percentile(r.timing.exact, 0.5)) / direct_p50,
                static_cast<double>(percentile(r.timing.semantic, 0.5)) / direct_p50);
  }
  if (r.timing.direct_rps > 0) {
    std::printf("  closed loop, %d connections: exact hits %.0f req/s, direct to the sim %.0f req/s (%.2fx)\n",
                kLoopConnections, r.timing.exact_rps, r.timing.direct_rps, r.timing.exact_rps / r.timing.direct_rps);
  }
  const double per_100k_mib = static_cast<double>(r.rss_after_kib - r.rss_before_kib) / 1024.0 * 100'000.0 / entries;
  std::printf("  RSS %ld -> %ld KiB: %.1f MiB per 100k entries\n", r.rss_before_kib, r.rss_after_kib, per_100k_mib);
  std::printf("  target exact hit p99 <= 200 us: %s (%lld us); semantic hit p99 <= 1 ms: %s (%lld us)\n",
              percentile(r.timing.exact, 0.99) <= 200 ? "met" : "NOT met",
              static_cast<long long>(percentile(r.timing.exact, 0.99)),
              percentile(r.timing.semantic, 0.99) <= 1000 ? "met" : "NOT met",
              static_cast<long long>(percentile(r.timing.semantic, 0.99)));
}

int run_speed(const Options& options) {
  if (options.one_cpu >= 0) {
    // Before anything starts: the sim, the gateways and Redis inherit the mask.
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(options.one_cpu, &set);
    if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "bench_cache: cannot run on CPU %d alone\n", options.one_cpu);
      return 2;
    }
  }
  std::unique_ptr<ChildProcess> sim;
  try {
    sim = std::make_unique<ChildProcess>(ChildProcess::start(
        {options.build_dir + "/tools/sim/hengshi-sim", "--listen", "127.0.0.1:0", "--name", "bench-sim", "--seed", "1"}));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_cache: the sim did not start: %s\n", error.what());
    return 2;
  }
  const std::string buckets = "  hot: {max_entries: 200000, max_bytes: 1073741824}\n"
                              "  cold: {max_entries: 200000, max_bytes: 1073741824}\n"
                              "  threshold: 0.8\n";
  std::printf("\nspeed: %d entries through the HTTP API, one gateway I/O thread, sim answering at once; %s\n",
              options.entries,
              options.one_cpu >= 0 ? ("client and servers on CPU " + std::to_string(options.one_cpu) + " alone").c_str()
                                   : "placement left to the scheduler");
  auto local = measure(options, sim->port(), "cache:\n" + buckets, "local tier");
  if (!local) return 2;
  print_speed("local tier", *local, options.entries);
  try {
    hengshi::testing::RedisServer redis;
    auto shared = measure(options, sim->port(),
                          "cache:\n" + buckets + "  redis: {host: 127.0.0.1, port: " + std::to_string(redis.port()) + "}\n",
                          "with the Redis tier");
    if (shared) {
      print_speed("with the Redis tier (write-through, pub/sub)", *shared, options.entries);
      std::printf("  redis: %s", redis.command("INFO memory").substr(0, 200).c_str());
      std::printf("\n  redis keys: %s", redis.command("DBSIZE").c_str());
    }
  } catch (const std::exception& error) {
    std::printf("with the Redis tier: skip: %s\n", error.what());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_cache: the answer cache's precision (ATEC pairs) and speed (HTTP, 100k entries)"};
  Options options;
  app.add_option("--data", options.data_dir, "folder with atec_ccks_dev_pairs.jsonl (default ../shared/data)");
  app.add_option("--section", options.section, "precision | speed | all")
      ->check(CLI::IsMember({"precision", "speed", "all"}));
  app.add_option("--entries", options.entries, "answers stored before timing")->check(CLI::Range(1000, 2'000'000));
  app.add_flag("--quick", options.quick, "fewer pairs and samples");
  app.add_option("--one-cpu", options.one_cpu, "speed: run the client and every server on this CPU alone")
      ->check(CLI::Range(0, 1023));
  app.add_option("--build-dir", options.build_dir, "build folder");
  app.add_option("--source-dir", options.source_dir, "source tree");
  CLI11_PARSE(app, argc, argv);
  if (options.build_dir.empty()) {
    std::error_code ec;
    fs::path self = fs::canonical("/proc/self/exe", ec);
    options.build_dir = ec ? "build" : self.parent_path().parent_path().string();
  }
  if (options.source_dir.empty()) options.source_dir = HENGSHI_SOURCE_DIR;
  if (options.data_dir.empty()) {
    const char* env = std::getenv("HENGSHI_DATA_DIR");
    options.data_dir = env ? env : HENGSHI_DEFAULT_DATA_DIR;
  }
  ::alarm(3600);  // bounded, whatever happens
  int status = 0;
  if (options.section != "speed") status = run_precision(options, hengshi::CacheConfig{}.threshold);
  if (status == 0 && options.section != "precision") status = run_speed(options);
  return status;
}
