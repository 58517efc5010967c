// bench_chaos: how the gateway's answers hold up while its cloud upstream fails, measured for the
// chain configuration and a naive one (no retries, no breakers, no offline mode, no last resort)
// in the same run, under the identical request schedule.
//
//   bench_chaos [--rate 20] [--seconds 60] [--deadline-ms 3000] [--stream-share 0]
//               [--build-dir DIR] [--source-dir DIR] [--intent-model DIR] [--seed 1]
//               [--work-dir DIR | --keep-work]   (bench/chaos passes the folders)
//
// It starts one hengshi-sim and two `hengshi serve` (chain, naive) in front of it, all on
// 127.0.0.1, then sends a fixed-rate open-loop mix (60% FAQ questions the demo edge model answers,
// 40% questions only the cloud can answer; every request with X-Hengshi-Deadline-Ms) to both
// gateways at once while the sim goes through five phases:
//   normal → 30% errors (500) → latency spike past the deadline → full outage (sim killed:
//   connection refused) → recovery (sim restarted on the same port, healthy again).
// Per phase and gateway it prints the success rate, the share answered within the deadline, the
// share degraded, latency percentiles and upstream attempts per request, then the targets of
// issue 9 with met / NOT met. Exit 0 whenever it ran (targets not met included); 2 when it could
// not run (a binary missing, a process that would not start, no usable questions).
//
// Times: a request belongs to the phase its due time falls in; its latency runs from that due
// time (open loop, so a stalled gateway shows in the tail). Phase conditions switch 20 ms before
// the phase's first request is due. Everything is bounded: each request by deadline + grace, the
// whole program by an alarm.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/asio.h"
#include "support/child_process.h"
#include "support/http_client.h"

namespace {

using hengshi::asio::awaitable;
using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;
using nlohmann::json;
namespace asio = hengshi::asio;
namespace beast = hengshi::beast;
namespace http = hengshi::http;
namespace fs = std::filesystem;
using hengshi::tcp;
using hengshi::use_awaitable;
using hengshi::testing::ChildProcess;

// ---------------------------------------------------------------------------------------------
// Children are killed on SIGINT/SIGTERM and by the watchdog alarm: they run in their own process
// groups (ChildProcess), so nothing else would stop them if this program died. A signal handler
// can only reach a fixed array of atomics, hence this one piece of static state.
std::array<std::atomic<pid_t>, 4> g_child_pids{};

void register_child(std::size_t slot, pid_t pid) { g_child_pids[slot].store(pid); }

void kill_children_and_exit(int signal_number) {
  for (auto& pid : g_child_pids) {
    pid_t p = pid.load();
    if (p > 0) ::kill(p, SIGKILL);
  }
  if (signal_number == SIGALRM) {
    static const char message[] = "bench_chaos: watchdog: the run took too long, stopped\n";
    (void)!::write(STDERR_FILENO, message, sizeof(message) - 1);
  }
  ::_exit(signal_number == SIGALRM ? 2 : 128 + signal_number);
}

// ---------------------------------------------------------------------------------------------
struct Options {
  double rate = 20;     // requests per second, per gateway
  double seconds = 60;  // all five phases together
  std::int64_t deadline_ms = 3000;
  double stream_share = 0;       // share of streaming requests
  double faq_share = 0.6;        // share of questions the edge answers
  std::int64_t grace_ms = 2000;  // the client gives up at deadline + grace
  std::uint64_t seed = 1;
  std::string build_dir;
  std::string source_dir;
  std::string intent_model;  // an existing `hengshi train` output; "" = train one here
  std::string work_dir;      // "" = a temporary folder, removed at the end unless keep_work
  bool keep_work = false;
};

enum class Kind { faq, cloud };

struct Planned {
  Clock::duration offset;  // due time after the load starts
  Kind kind;
  std::string text;
  bool stream;
};

// What one gateway answered to one planned request.
struct Outcome {
  bool done = false;
  int status = 0;          // 0 = no HTTP answer (connection error or client timeout)
  bool timed_out = false;  // gave up at deadline + grace
  bool valid = false;  // a well-formed answer: JSON with choices, or a stream that ended in [DONE]
  std::int64_t latency_us = 0;
  std::optional<int> level;        // hengshi.level: the chain level that answered
  std::optional<int> first_level;  // the level of hengshi.plan's first step ("L2:cloud_small")
  std::optional<double> attempts;
  bool offline = false;
  std::string route;
};

struct Phase {
  std::string name;
  std::string condition;
  double start_s;
  double end_s;
};

struct Gateway {
  std::string name;  // chain | naive
  std::unique_ptr<ChildProcess> process;
  int port = 0;
  int admin_port = 0;
  std::vector<Outcome> outcomes;  // one per planned request
};

// Counters read at each phase boundary.
struct UpstreamCounts {
  double calls = 0;    // upstream calls made, connection refusals included
  double skipped = 0;  // calls refused inside the gateway (breaker open, bulkhead full): no call
};

// Counters read at each phase boundary, per gateway. The sim's are read before the boundary's
// change (the end of the previous phase) and as they stand after it (the start of this phase):
// they differ when the sim is killed (unknown) or restarted (zero).
struct Snapshot {
  std::array<std::optional<UpstreamCounts>, 2> gateway;  // hengshi_upstream_requests_total
  std::array<std::optional<double>, 2> sim_before;       // sim requests_by_model of that gateway
  std::array<std::optional<double>, 2> sim_after;
};

json parse_lenient(const std::string& text) {
  return json::parse(text, nullptr, /*allow_exceptions=*/false);
}

std::string dump_text(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// Sim profiles (tools/sim/profile.h). Healthy latencies stay well inside the deadline; the spike
// puts every answer (and every first token) past it.
json healthy_profile(std::int64_t deadline_ms) {
  const std::int64_t p50 = std::min<std::int64_t>(300, deadline_ms / 10);
  const std::int64_t p95 = std::min<std::int64_t>(800, deadline_ms / 4);
  return {{"latency_ms", {{"p50", p50}, {"p95", p95}}},
          {"ttft_ms", {{"p50", p50 * 2 / 3}, {"p95", p95 * 2 / 3}}},
          {"tokens_per_s", 0},
          {"output_tokens", {{"min", 8}, {"max", 32}}}};
}

json errors_profile(std::int64_t deadline_ms) {
  json profile = healthy_profile(deadline_ms);
  profile["error_rate"] = 0.3;
  return profile;
}

json spike_profile(std::int64_t deadline_ms) {
  json slow = {{"p50", deadline_ms * 2}, {"p95", deadline_ms * 3}};
  json profile = healthy_profile(deadline_ms);
  profile["latency_ms"] = slow;
  profile["ttft_ms"] = slow;
  return profile;
}

// ---------------------------------------------------------------------------------------------
// Blocking admin calls (controller thread). Failures are values: nullopt.
std::optional<hengshi::testing::HttpResult> admin_call(int port, const std::string& method,
                                                       const std::string& target,
                                                       const std::string& body = "") {
  try {
    hengshi::testing::HttpRequest request;
    request.method = method;
    request.target = target;
    request.body = body;
    return hengshi::testing::http_call("127.0.0.1", port, request, Millis(1500));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The samples of hengshi_upstream_requests_total{pool,upstream,outcome}, summed over pools and
// members: every outcome is a call made, except circuit_open and overloaded (refused inside the
// gateway before any connection).
std::optional<UpstreamCounts> gateway_upstream_counts(int admin_port) {
  auto result = admin_call(admin_port, "GET", "/metrics");
  if (!result || result->status != 200) return std::nullopt;
  std::istringstream lines(result->body);
  std::string line;
  UpstreamCounts counts;  // zero until the family's first sample appears
  static const std::string name = "hengshi_upstream_requests_total";
  while (std::getline(lines, line)) {
    if (line.rfind(name, 0) != 0) continue;
    if (line.size() > name.size() && line[name.size()] != '{' && line[name.size()] != ' ') continue;
    auto space = line.find_last_of(' ');
    if (space == std::string::npos) continue;
    double value = 0;
    try {
      value = std::stod(line.substr(space + 1));
    } catch (const std::exception&) {
      continue;
    }
    const bool refused_inside = line.find("outcome=\"circuit_open\"") != std::string::npos ||
                                line.find("outcome=\"overloaded\"") != std::string::npos;
    (refused_inside ? counts.skipped : counts.calls) += value;
  }
  return counts;
}

// The sim's requests per gateway: each gateway's pools name models "<gateway>-small|large".
std::array<std::optional<double>, 2> sim_requests(int sim_port,
                                                  const std::array<std::string, 2>& names) {
  std::array<std::optional<double>, 2> out;
  auto result = admin_call(sim_port, "GET", "/admin/stats");
  if (!result || result->status != 200) return out;
  json stats = parse_lenient(result->body);
  if (!stats.is_object() || !stats.contains("requests_by_model") ||
      !stats["requests_by_model"].is_object()) {
    return out;
  }
  for (std::size_t g = 0; g < names.size(); ++g) {
    double total = 0;
    for (const auto& [model, count] : stats["requests_by_model"].items()) {
      if (model.rfind(names[g] + "-", 0) == 0 && count.is_number()) total += count.get<double>();
    }
    out[g] = total;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The load: one io_context thread; request k of the schedule goes to both gateways at its due
// time, each on its own connection, and never waits for an earlier one (open loop).
void read_meta(const json& meta, Outcome& out) {
  if (!meta.is_object()) return;
  if (auto it = meta.find("level"); it != meta.end() && it->is_number_integer())
    out.level = it->get<int>();
  if (auto it = meta.find("attempts"); it != meta.end() && it->is_number())
    out.attempts = it->get<double>();
  if (auto it = meta.find("offline"); it != meta.end() && it->is_boolean())
    out.offline = it->get<bool>();
  if (auto it = meta.find("route"); it != meta.end() && it->is_string()) {
    out.route = it->get<std::string>();
  } else if (auto decision = meta.find("decision");
             decision != meta.end() && decision->is_object()) {
    if (auto route = decision->find("route"); route != decision->end() && route->is_string()) {
      out.route = route->get<std::string>();
    }
  }
  if (auto plan = meta.find("plan"); plan != meta.end() && plan->is_array() && !plan->empty()) {
    const json& first = plan->front();
    if (first.is_string()) {
      const std::string step = first.get<std::string>();
      if (step.size() >= 2 && step[0] == 'L' && step[1] >= '0' && step[1] <= '9')
        out.first_level = step[1] - '0';
    }
  }
}

// Degraded: answered below the plan's first level, by the last resort (L4), in offline mode, or
// by the edge for a question that needs the cloud. Without a plan in the metadata, any level > 0.
bool is_degraded(const Outcome& out, Kind kind) {
  if (out.offline || out.level.value_or(0) >= 4) return true;
  if (kind == Kind::cloud && out.route == "edge") return true;
  if (out.level && out.first_level) return *out.level > *out.first_level;
  return out.level.value_or(0) > 0 && !out.first_level;
}

void read_body(const std::string& body, bool stream, Outcome& out) {
  if (!stream) {
    json doc = parse_lenient(body);
    if (!doc.is_object()) return;
    if (auto it = doc.find("hengshi"); it != doc.end()) read_meta(*it, out);
    out.valid = doc.contains("choices") && doc["choices"].is_array() && !doc["choices"].empty();
    return;
  }
  // SSE: the metadata rides on the last chunk that carries "hengshi"; an error event or a
  // missing [DONE] makes the stream invalid.
  std::istringstream lines(body);
  std::string line;
  bool done = false;
  bool error_event = false;
  bool content = false;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("data:", 0) != 0) continue;
    std::string payload = line.substr(5);
    if (!payload.empty() && payload.front() == ' ') payload.erase(0, 1);
    if (payload == "[DONE]") {
      done = true;
      continue;
    }
    json chunk = parse_lenient(payload);
    if (!chunk.is_object()) {
      error_event = true;
      continue;
    }
    if (chunk.contains("error")) error_event = true;
    if (chunk.contains("choices")) content = true;
    if (auto it = chunk.find("hengshi"); it != chunk.end()) read_meta(*it, out);
  }
  out.valid = done && content && !error_event;
}

awaitable<void> send_one(tcp::endpoint endpoint, std::string body, bool stream,
                         std::int64_t deadline_ms, Millis give_up_after, Clock::time_point due,
                         Outcome& out) {
  auto executor = co_await asio::this_coro::executor;
  beast::tcp_stream socket(executor);
  beast::error_code ec;
  socket.expires_after(give_up_after - std::chrono::duration_cast<Millis>(Clock::now() - due));
  auto finish = [&](bool timed_out) {
    out.done = true;
    out.timed_out = timed_out;
    out.latency_us =
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - due).count();
  };
  co_await socket.async_connect(endpoint, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    finish(ec == beast::error::timeout);
    co_return;
  }
  socket.socket().set_option(tcp::no_delay(true), ec);
  http::request<http::string_body> request{http::verb::post, "/v1/chat/completions", 11};
  request.set(http::field::host, "127.0.0.1");
  request.set(http::field::content_type, "application/json");
  request.set("X-Hengshi-Deadline-Ms", std::to_string(deadline_ms));
  request.keep_alive(false);
  request.body() = std::move(body);
  request.prepare_payload();
  co_await http::async_write(socket, request, asio::redirect_error(use_awaitable, ec));
  if (ec) {
    finish(ec == beast::error::timeout);
    co_return;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 << 20);
  co_await http::async_read(socket, buffer, parser, asio::redirect_error(use_awaitable, ec));
  if (ec && !parser.is_header_done()) {
    finish(ec == beast::error::timeout);
    co_return;
  }
  finish(ec == beast::error::timeout);
  out.status = static_cast<int>(parser.get().result_int());
  read_body(parser.get().body(), stream, out);
  // The head arrived but the body did not complete: an answer cut short is not valid.
  if (ec) out.valid = false;
}

std::string request_body(const Planned& planned) {
  json body = {{"model", "auto"},
               {"messages", json::array({{{"role", "user"}, {"content", planned.text}}})},
               {"max_tokens", 64},
               {"stream", planned.stream}};
  return dump_text(body);
}

awaitable<void> run_schedule(const std::vector<Planned>& schedule, std::vector<Gateway*> gateways,
                             Clock::time_point start, std::int64_t deadline_ms,
                             Millis give_up_after) {
  auto executor = co_await asio::this_coro::executor;
  asio::steady_timer timer(executor);
  std::vector<tcp::endpoint> endpoints;
  for (Gateway* gateway : gateways) {
    endpoints.emplace_back(asio::ip::make_address_v4("127.0.0.1"),
                           static_cast<unsigned short>(gateway->port));
  }
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    const Clock::time_point due = start + schedule[i].offset;
    if (due > Clock::now()) {
      timer.expires_at(due);
      beast::error_code ec;
      co_await timer.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    const std::string body = request_body(schedule[i]);
    for (std::size_t g = 0; g < gateways.size(); ++g) {
      asio::co_spawn(executor,
                     send_one(endpoints[g], body, schedule[i].stream, deadline_ms, give_up_after,
                              due, gateways[g]->outcomes[i]),
                     asio::detached);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Questions: FAQ texts from the demo data that the router sends to the edge with high
// confidence, and open questions it sends to the cloud — checked with `hengshi route` against
// the chain gateway's own config, so the mix really is 60/40 edge/cloud.
const std::vector<std::string>& open_questions() {
  static const std::vector<std::string> questions = {
      "Write a short poem about autumn rain in a mountain village.",
      "Explain the difference between TCP congestion control algorithms Reno and CUBIC.",
      "What were the main causes of the fall of the Western Roman Empire?",
      "Summarise the plot of Dream of the Red Chamber in five sentences.",
      "How does a transformer neural network use attention? Explain with an example.",
      "Draft a polite email to my landlord asking to fix the heating this week.",
      "Compare the economic policies of Keynes and Hayek.",
      "Give me a three-day itinerary for Chengdu with food recommendations.",
      "Why is the sky blue at noon and red at sunset?",
      "Write a Python function that merges two sorted lists and explain its complexity.",
      "What is the philosophical argument behind Zeno's paradoxes?",
      "Suggest five names for a bakery that specialises in sourdough.",
      "请写一首关于秋天的七言绝句。",
      "解释一下量子纠缠的基本原理，并举一个通俗的例子。",
      "帮我比较一下太阳能和风能发电的优缺点。",
      "如何用递归实现快速排序？请给出代码。",
      "给我讲一个关于月亮的神话故事。",
      "分析一下唐朝由盛转衰的主要原因。",
      "帮我写一段生日祝福语，送给我的大学老师。",
      "为什么深海鱼类能承受巨大的水压？",
      "请解释区块链中的工作量证明机制。",
      "推荐几本适合初学者的经济学书籍并说明理由。",
      "Describe how vaccines train the immune system.",
      "What are the trade-offs between microservices and a monolith?",
  };
  return questions;
}

struct QuestionPools {
  std::vector<std::string> faq;
  std::vector<std::string> cloud;
};

std::optional<QuestionPools> classify_questions(const std::string& hengshi_bin,
                                                const std::string& config_path,
                                                const std::string& faq_path,
                                                const std::string& work, std::int64_t deadline_ms) {
  std::vector<std::string> faq_texts;
  {
    std::ifstream in(faq_path);
    std::string line;
    while (std::getline(in, line)) {
      json row = parse_lenient(line);
      if (row.is_object() && row.contains("text") && row["text"].is_string())
        faq_texts.push_back(row["text"]);
    }
  }
  if (faq_texts.empty()) {
    std::fprintf(stderr, "bench_chaos: no questions in %s\n", faq_path.c_str());
    return std::nullopt;
  }
  const std::string input_path = work + "/route-input.jsonl";
  {
    std::ofstream input(input_path);
    for (const auto& text : faq_texts)
      input << dump_text(json{{"text", text}, {"deadline_ms", deadline_ms}}) << '\n';
    for (const auto& text : open_questions()) {
      input << dump_text(json{{"text", text}, {"deadline_ms", deadline_ms}}) << '\n';
    }
  }
  auto finished = ChildProcess::run({hengshi_bin, "route", "--config", config_path},
                                    Millis(120'000), input_path);
  if (finished.exit_code != 0) {
    std::fprintf(stderr, "bench_chaos: hengshi route failed:\n%s\n", finished.output.c_str());
    return std::nullopt;
  }
  QuestionPools pools;
  std::istringstream lines(finished.stdout_text);
  std::string line;
  std::map<std::string, int> faq_reasons;
  while (std::getline(lines, line)) {
    json decision = parse_lenient(line);
    if (!decision.is_object() || !decision.contains("line") ||
        !decision["line"].is_number_integer())
      continue;
    const auto index = decision["line"].get<std::size_t>() - 1;
    const std::string route = decision.value("route", "");
    const std::string reason = decision.value("reason", "");
    if (index < faq_texts.size()) {
      ++faq_reasons[route + "/" + reason];
      // Only confident edge answers: a middle-band decision may consult the cloud as well.
      if (route == "edge" && reason == "high_confidence") pools.faq.push_back(faq_texts[index]);
    } else if (index - faq_texts.size() < open_questions().size()) {
      if (route.rfind("cloud", 0) == 0)
        pools.cloud.push_back(open_questions()[index - faq_texts.size()]);
    }
  }
  std::string reasons;
  for (const auto& [key, count] : faq_reasons) reasons += " " + key + "×" + std::to_string(count);
  std::printf(
      "questions: %zu of %zu FAQ texts route to the edge with high confidence (%s ); "
      "%zu of %zu open questions route to the cloud\n",
      pools.faq.size(), faq_texts.size(), reasons.c_str() + (reasons.empty() ? 0 : 1),
      pools.cloud.size(), open_questions().size());
  if (pools.faq.empty() || pools.cloud.empty()) {
    std::fprintf(stderr,
                 "bench_chaos: need at least one edge FAQ question and one cloud question\n");
    return std::nullopt;
  }
  return pools;
}

// ---------------------------------------------------------------------------------------------
// Processes.
std::unique_ptr<ChildProcess> start_process(const std::vector<std::string>& argv, std::size_t slot,
                                            const std::string& what) {
  try {
    auto child = std::make_unique<ChildProcess>(ChildProcess::start(argv, Millis(30'000)));
    register_child(slot, child->pid());
    return child;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_chaos: %s did not start: %s\n", what.c_str(), error.what());
    return nullptr;
  }
}

std::unique_ptr<ChildProcess> start_sim(const std::string& sim_bin, const std::string& listen,
                                        const std::string& profile_path, std::uint64_t seed) {
  return start_process({sim_bin, "--listen", listen, "--profile", profile_path, "--seed",
                        std::to_string(seed), "--name", "chaos-sim"},
                       0, "hengshi-sim");
}

std::string gateway_yaml(const std::string& name, int sim_port, const std::string& model_dir,
                         bool naive) {
  const std::string base_url = "http://127.0.0.1:" + std::to_string(sim_port) + "/v1";
  std::ostringstream yaml;
  yaml << "# bench/chaos: the " << name << " gateway\n"
       // One I/O thread each: two gateways, the sim and the load share a small machine.
       << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", threads: 1, expose_figures: true}\n"
       << "log: {requests: \"\"}\n"
       << "edge: {intent_model: " << dump_text(json(model_dir)) << "}\n"
       << "pools:\n"
       << "  cloud-small: {members: [{name: sim, base_url: \"" << base_url << "\", model: " << name
       << "-small}]}\n"
       << "  cloud-large: {members: [{name: sim, base_url: \"" << base_url << "\", model: " << name
       << "-large}]}\n";
  if (naive) {
    yaml
        << "chain: {retry: {enabled: false}, breaker: {enabled: false}, offline: {enabled: false}, "
           "last_resort: {kind: error}}\n";
  }
  return yaml.str();
}

// ---------------------------------------------------------------------------------------------
// Report.
struct PhaseStats {
  std::size_t requests = 0;
  std::size_t cloud_requests = 0;
  std::size_t ok = 0;              // 200 with a valid answer
  std::size_t ok_in_deadline = 0;  // ... within the deadline
  std::size_t degraded = 0;        // ok answers that is_degraded()
  std::size_t timed_out = 0;
  std::size_t transport_errors = 0;
  std::map<int, std::size_t> statuses;
  double attempts_sum = 0;
  std::size_t attempts_seen = 0;
  std::int64_t p50_us = 0, p95_us = 0, p99_us = 0;
  std::optional<double> sim_attempts;      // upstream requests the sim saw from this gateway
  std::optional<double> gateway_attempts;  // upstream calls the gateway counted
  double gateway_skipped = 0;              // calls refused inside it (breaker open, bulkhead full)
};

std::int64_t percentile(const std::vector<std::int64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

PhaseStats phase_stats(const std::vector<Planned>& schedule, const Gateway& gateway,
                       const Phase& phase, std::int64_t deadline_ms) {
  PhaseStats stats;
  std::vector<std::int64_t> latencies;
  for (std::size_t i = 0; i < schedule.size(); ++i) {
    const double due_s = std::chrono::duration<double>(schedule[i].offset).count();
    if (due_s < phase.start_s || due_s >= phase.end_s) continue;
    const Outcome& out = gateway.outcomes[i];
    ++stats.requests;
    if (schedule[i].kind == Kind::cloud) ++stats.cloud_requests;
    latencies.push_back(out.latency_us);
    if (out.status == 0) {
      if (out.timed_out) {
        ++stats.timed_out;
      } else {
        ++stats.transport_errors;
      }
      continue;
    }
    ++stats.statuses[out.status];
    if (out.attempts) {
      stats.attempts_sum += *out.attempts;
      ++stats.attempts_seen;
    }
    if (out.status != 200 || !out.valid) continue;
    ++stats.ok;
    if (out.latency_us <= deadline_ms * 1000) ++stats.ok_in_deadline;
    if (is_degraded(out, schedule[i].kind)) ++stats.degraded;
  }
  std::sort(latencies.begin(), latencies.end());
  stats.p50_us = percentile(latencies, 0.50);
  stats.p95_us = percentile(latencies, 0.95);
  stats.p99_us = percentile(latencies, 0.99);
  return stats;
}

double share(std::size_t part, std::size_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

std::string per_request(std::optional<double> total, std::size_t requests) {
  if (!total || requests == 0) return "n/a";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f", *total / static_cast<double>(requests));
  return text;
}

std::string statuses_text(const PhaseStats& stats) {
  std::string text;
  for (const auto& [status, count] : stats.statuses)
    text += std::to_string(status) + "×" + std::to_string(count) + " ";
  if (stats.timed_out) text += "timeout×" + std::to_string(stats.timed_out) + " ";
  if (stats.transport_errors) text += "conn-err×" + std::to_string(stats.transport_errors) + " ";
  if (stats.gateway_skipped > 0)
    text += "| skipped-calls×" + std::to_string(std::lround(stats.gateway_skipped)) + " ";
  if (!text.empty()) text.pop_back();
  return text;
}

std::string ratio_text(double chain, double naive) {
  if (naive <= 0) return "n/a";
  const double ratio = chain / naive;
  char text[32];
  // Small ratios (an edge answer against a cloud timeout) keep three digits, not "0.00x".
  std::snprintf(text, sizeof(text), ratio > 0 && ratio < 0.1 ? "%.3fx" : "%.2fx", ratio);
  return text;
}

void print_report(const std::vector<Planned>& schedule, const std::vector<Phase>& phases,
                  const std::array<Gateway*, 2>& gateways, const std::vector<Snapshot>& snapshots,
                  const Options& options) {
  std::vector<std::array<PhaseStats, 2>> all(phases.size());
  for (std::size_t p = 0; p < phases.size(); ++p) {
    for (std::size_t g = 0; g < 2; ++g) {
      PhaseStats stats = phase_stats(schedule, *gateways[g], phases[p], options.deadline_ms);
      const Snapshot& begin = snapshots[p];
      const Snapshot& end = snapshots[p + 1];
      if (begin.gateway[g] && end.gateway[g]) {
        stats.gateway_attempts = end.gateway[g]->calls - begin.gateway[g]->calls;
        stats.gateway_skipped = end.gateway[g]->skipped - begin.gateway[g]->skipped;
      }
      if (begin.sim_after[g] && end.sim_before[g]) {
        stats.sim_attempts = *end.sim_before[g] - *begin.sim_after[g];
      }
      all[p][g] = stats;
    }
  }

  std::printf("\n%-14s %-6s %5s %7s %8s %8s %7s %7s %7s %8s %8s %8s  %s\n", "phase", "config",
              "reqs", "ok%", "in-ddl%", "degr%", "p50ms", "p95ms", "p99ms", "att/req", "att/req",
              "attempts", "answers");
  std::printf("%-14s %-6s %5s %7s %8s %8s %7s %7s %7s %8s %8s %8s\n", "", "", "", "", "", "", "",
              "", "", "(sim)", "(gw)", "(meta)");
  for (std::size_t p = 0; p < phases.size(); ++p) {
    for (std::size_t g = 0; g < 2; ++g) {
      const PhaseStats& s = all[p][g];
      std::string meta = s.attempts_seen ? per_request(s.attempts_sum, s.attempts_seen) : "n/a";
      std::printf("%-14s %-6s %5zu %7.1f %8.1f %8.1f %7.0f %7.0f %7.0f %8s %8s %8s  %s\n",
                  g == 0 ? phases[p].name.c_str() : "", gateways[g]->name.c_str(), s.requests,
                  share(s.ok, s.requests), share(s.ok_in_deadline, s.requests),
                  share(s.degraded, s.requests), static_cast<double>(s.p50_us) / 1000,
                  static_cast<double>(s.p95_us) / 1000, static_cast<double>(s.p99_us) / 1000,
                  per_request(s.sim_attempts, s.requests).c_str(),
                  per_request(s.gateway_attempts, s.requests).c_str(), meta.c_str(),
                  statuses_text(s).c_str());
    }
    const PhaseStats& c = all[p][0];
    const PhaseStats& n = all[p][1];
    std::string attempts_ratio = "n/a";
    if (c.gateway_attempts && n.gateway_attempts)
      attempts_ratio = ratio_text(*c.gateway_attempts, *n.gateway_attempts);
    std::printf(
        "%-14s %-6s in-deadline %+.1f points, p99 %s, upstream attempts %s (chain vs naive)\n", "",
        "ratio", share(c.ok_in_deadline, c.requests) - share(n.ok_in_deadline, n.requests),
        ratio_text(static_cast<double>(c.p99_us), static_cast<double>(n.p99_us)).c_str(),
        attempts_ratio.c_str());
  }
  std::printf(
      "\nin-ddl%%: HTTP 200 with a valid answer within %lld ms of its due time; degr%%: such "
      "answers "
      "from a level below the plan's first (hengshi.level vs hengshi.plan; L4 always), offline, or "
      "the "
      "edge for a cloud question;\n"
      "att/req (sim): requests the sim saw from that gateway / requests sent (n/a while it is "
      "down); "
      "att/req (gw): the gateway's hengshi_upstream_requests_total delta / requests sent;\n"
      "attempts (meta): mean hengshi.attempts of the answers that carry it. Latency counts from "
      "the "
      "due time; a request still unanswered at deadline + %lld ms is a timeout.\n",
      static_cast<long long>(options.deadline_ms), static_cast<long long>(options.grace_ms));

  // Targets (issue 9). The outage is phase 3; attempts are judged per request that needs the
  // cloud (edge answers make no upstream call), the stricter reading.
  const std::size_t outage = 3;
  const char* row = "%-52s %-24s %-8s %-24s %s\n";
  std::printf("\n");
  std::printf(row, "targets (issue 9)", "chain", "", "naive (baseline)", "");
  auto in_deadline_text = [&](std::size_t g) {
    const PhaseStats& s = all[outage][g];
    char text[64];
    std::snprintf(text, sizeof(text), "%.2f%% (%zu/%zu)", share(s.ok_in_deadline, s.requests),
                  s.ok_in_deadline, s.requests);
    return std::string(text);
  };
  auto outage_met = [&](std::size_t g) {
    const PhaseStats& s = all[outage][g];
    return s.requests > 0 &&
           static_cast<double>(s.ok_in_deadline) >= 0.999 * static_cast<double>(s.requests);
  };
  std::printf(row, "outage: >= 99.9% answered 200 within the deadline", in_deadline_text(0).c_str(),
              outage_met(0) ? "met" : "NOT met", in_deadline_text(1).c_str(),
              outage_met(1) ? "met" : "NOT met");

  auto attempts_value = [&](std::size_t g) -> std::optional<double> {
    const PhaseStats& s = all[outage][g];
    if (!s.gateway_attempts || s.cloud_requests == 0) return std::nullopt;
    return *s.gateway_attempts / static_cast<double>(s.cloud_requests);
  };
  auto attempts_text = [&](std::size_t g) {
    auto value = attempts_value(g);
    if (!value) return std::string("n/a");
    char text[32];
    std::snprintf(text, sizeof(text), "%.2f", *value);
    return std::string(text);
  };
  auto attempts_verdict = [&](std::size_t g) {
    auto value = attempts_value(g);
    if (!value) return "unknown";
    return *value <= 1.2 ? "met" : "NOT met";
  };
  std::printf(row, "outage: upstream calls per cloud request <= 1.2", attempts_text(0).c_str(),
              attempts_verdict(0), attempts_text(1).c_str(), attempts_verdict(1));

  auto p99_failures = [&](std::size_t g) {
    std::string failed;
    for (std::size_t p = 0; p < phases.size(); ++p) {
      if (all[p][g].requests > 0 && all[p][g].p99_us > options.deadline_ms * 1000) {
        failed += (failed.empty() ? "" : ",") + phases[p].name;
      }
    }
    return failed;
  };
  const std::string chain_p99 = p99_failures(0);
  const std::string naive_p99 = p99_failures(1);
  const std::string chain_p99_text = chain_p99.empty() ? "all phases" : "over in " + chain_p99;
  const std::string naive_p99_text = naive_p99.empty() ? "all phases" : "over in " + naive_p99;
  std::printf(row, "p99 within the deadline in every phase", chain_p99_text.c_str(),
              chain_p99.empty() ? "met" : "NOT met", naive_p99_text.c_str(),
              naive_p99.empty() ? "met" : "NOT met");
}

// ---------------------------------------------------------------------------------------------
int run(const Options& options) {
  const fs::path build(options.build_dir);
  const fs::path source(options.source_dir);
  const std::string hengshi_bin = (build / "src/cli/hengshi").string();
  const std::string sim_bin = (build / "tools/sim/hengshi-sim").string();
  for (const auto& binary : {hengshi_bin, sim_bin}) {
    if (::access(binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "bench_chaos: %s is missing (build hengshi and hengshi-sim first)\n",
                   binary.c_str());
      return 2;
    }
  }
  const std::string faq_path = (source / "data/demo_faq.jsonl").string();

  // A --work-dir belongs to the caller (bench/chaos removes it even after a signal); a folder
  // made here is removed on every normal return.
  std::string work = options.work_dir;
  bool remove_at_end = false;
  if (work.empty()) {
    std::string work_template = (fs::temp_directory_path() / "hengshi-chaos-XXXXXX").string();
    if (::mkdtemp(work_template.data()) == nullptr) {
      std::fprintf(stderr, "bench_chaos: cannot create a work directory\n");
      return 2;
    }
    work = work_template;
    remove_at_end = !options.keep_work;
  } else {
    std::error_code ec;
    fs::create_directories(work, ec);
    if (ec) {
      std::fprintf(stderr, "bench_chaos: cannot create %s: %s\n", work.c_str(),
                   ec.message().c_str());
      return 2;
    }
  }
  struct RemoveWork {
    std::string path;
    bool remove;
    ~RemoveWork() {
      std::error_code ec;
      if (remove) fs::remove_all(path, ec);
    }
  } remove_work{work, remove_at_end};

  // The demo edge model, trained once (or reused).
  std::string model_dir = options.intent_model;
  if (model_dir.empty()) {
    model_dir = work + "/model";
    const auto started = Clock::now();
    auto trained = ChildProcess::run({hengshi_bin, "train", "--data", faq_path, "--out", model_dir},
                                     Millis(600'000));
    if (trained.exit_code != 0) {
      std::fprintf(stderr, "bench_chaos: hengshi train failed:\n%s\n", trained.output.c_str());
      return 2;
    }
    std::printf("trained the demo intent model in %.1f s\n",
                std::chrono::duration<double>(Clock::now() - started).count());
  }

  // The sim, healthy; its port is kept for the restart after the outage.
  const std::string healthy_path = work + "/sim-healthy.json";
  std::ofstream(healthy_path) << healthy_profile(options.deadline_ms).dump();
  std::unique_ptr<ChildProcess> sim = start_sim(sim_bin, "127.0.0.1:0", healthy_path, options.seed);
  if (!sim) return 2;
  const int sim_port = sim->port();

  Gateway chain{"chain", nullptr, 0, 0, {}};
  Gateway naive{"naive", nullptr, 0, 0, {}};
  const std::array<Gateway*, 2> gateways = {&chain, &naive};
  const std::array<std::string, 2> names = {chain.name, naive.name};
  for (std::size_t g = 0; g < 2; ++g) {
    Gateway& gateway = *gateways[g];
    const std::string config_path = work + "/" + gateway.name + ".yaml";
    std::ofstream(config_path) << gateway_yaml(gateway.name, sim_port, model_dir, g == 1);
    gateway.process = start_process({hengshi_bin, "serve", "--config", config_path}, g + 1,
                                    "hengshi serve (" + gateway.name + ")");
    if (!gateway.process) return 2;
    gateway.port = gateway.process->port();
    try {
      gateway.admin_port = gateway.process->admin_port();
    } catch (const std::exception& error) {
      std::fprintf(stderr, "bench_chaos: %s\n", error.what());
      return 2;
    }
  }

  auto pools =
      classify_questions(hengshi_bin, work + "/chain.yaml", faq_path, work, options.deadline_ms);
  if (!pools) return 2;

  // The schedule: identical for both gateways.
  std::mt19937_64 random(options.seed);
  std::bernoulli_distribution is_faq(options.faq_share);
  std::bernoulli_distribution is_stream(options.stream_share);
  std::vector<Planned> schedule;
  const auto count = static_cast<std::size_t>(options.rate * options.seconds);
  for (std::size_t i = 0; i < count; ++i) {
    Planned planned;
    planned.offset = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(static_cast<double>(i) / options.rate));
    planned.kind = is_faq(random) ? Kind::faq : Kind::cloud;
    const auto& pool = planned.kind == Kind::faq ? pools->faq : pools->cloud;
    planned.text = pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(random)];
    planned.stream = is_stream(random);
    schedule.push_back(std::move(planned));
  }
  for (Gateway* gateway : gateways) gateway->outcomes.assign(schedule.size(), Outcome{});

  const double s = options.seconds;
  const std::vector<Phase> phases = {
      {"normal", "healthy sim", 0, 0.2 * s},
      {"errors-30%", "sim error_rate 0.3 (500)", 0.2 * s, 0.4 * s},
      {"latency-spike", "sim latency/TTFT p50 " + std::to_string(2 * options.deadline_ms) + " ms",
       0.4 * s, 0.6 * s},
      {"outage", "sim killed: connection refused", 0.6 * s, 0.85 * s},
      {"recovery", "sim restarted on the same port, healthy", 0.85 * s, s},
  };
  std::printf(
      "load: %.0f req/s per gateway for %.0f s, identical schedule to both; %.0f%% FAQ (edge) / "
      "%.0f%% cloud "
      "questions, %.0f%% streaming; X-Hengshi-Deadline-Ms %lld\n",
      options.rate, options.seconds, 100 * options.faq_share, 100 * (1 - options.faq_share),
      100 * options.stream_share, static_cast<long long>(options.deadline_ms));
  for (const auto& phase : phases) {
    std::printf("  %-14s %5.1f–%5.1f s  %s\n", phase.name.c_str(), phase.start_s, phase.end_s,
                phase.condition.c_str());
  }
  std::printf(
      "chain: default chain settings; naive: chain.retry/breaker/offline off, last_resort error\n"
      "binaries: %s\n",
      options.build_dir.c_str());
  std::fflush(stdout);

  // Warm-up: one FAQ and one cloud question through each gateway, then zero the sim's counters.
  for (Gateway* gateway : gateways) {
    std::string seen;
    for (const auto* text : {&pools->faq.front(), &pools->cloud.front()}) {
      Planned planned{Clock::duration::zero(), Kind::faq, *text, false};
      hengshi::testing::HttpRequest request;
      request.method = "POST";
      request.target = "/v1/chat/completions";
      request.body = request_body(planned);
      request.headers["X-Hengshi-Deadline-Ms"] = std::to_string(options.deadline_ms);
      Outcome out;
      try {
        auto result = hengshi::testing::http_call("127.0.0.1", gateway->port, request,
                                                  Millis(options.deadline_ms + options.grace_ms));
        out.status = result.status;
        read_body(result.body, false, out);
      } catch (const std::exception&) {
      }
      seen += " " + std::to_string(out.status) + "/" + (out.route.empty() ? "?" : out.route);
    }
    std::printf("warm-up %s: status/route%s\n", gateway->name.c_str(), seen.c_str());
  }
  admin_call(sim_port, "POST", "/admin/reset");

  // Run: the load on its own thread, the phase controller here.
  const Millis give_up_after(options.deadline_ms + options.grace_ms);
  asio::io_context io(1);
  const Clock::time_point start = Clock::now() + Millis(200);
  asio::co_spawn(
      io, run_schedule(schedule, {&chain, &naive}, start, options.deadline_ms, give_up_after),
      asio::detached);

  std::vector<Snapshot> snapshots(phases.size() + 1);
  auto read_gateways = [&](Snapshot& snapshot) {
    for (std::size_t g = 0; g < 2; ++g)
      snapshot.gateway[g] = gateway_upstream_counts(gateways[g]->admin_port);
  };
  auto take_snapshot = [&](Snapshot& snapshot, bool sim_up) {
    if (sim_up) snapshot.sim_before = snapshot.sim_after = sim_requests(sim_port, names);
    read_gateways(snapshot);
  };
  take_snapshot(snapshots[0], true);
  std::thread load([&io] {
    // A request coroutine that throws ends only itself (its outcome stays "no answer").
    while (true) {
      try {
        io.run();
        return;
      } catch (const std::exception& error) {
        std::fprintf(stderr, "bench_chaos: a request failed: %s\n", error.what());
      }
    }
  });

  bool sim_up = true;
  std::string trouble;
  for (std::size_t p = 1; p < phases.size(); ++p) {
    std::this_thread::sleep_until(start +
                                  std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(phases[p].start_s)) -
                                  Millis(20));
    Snapshot& snapshot = snapshots[p];
    if (sim_up) snapshot.sim_before = snapshot.sim_after = sim_requests(sim_port, names);
    if (phases[p].name == "errors-30%" || phases[p].name == "latency-spike") {
      json profile = phases[p].name == "errors-30%" ? errors_profile(options.deadline_ms)
                                                    : spike_profile(options.deadline_ms);
      auto changed = admin_call(sim_port, "POST", "/admin/profile", profile.dump());
      if (!changed || changed->status != 200)
        trouble += "could not set the sim profile for " + phases[p].name + "; ";
    } else if (phases[p].name == "outage") {
      sim->signal(SIGKILL);
      sim->wait(Millis(5000));
      register_child(0, 0);
      sim_up = false;
      snapshot.sim_after = {};  // unknown while it is down
    } else if (phases[p].name == "recovery") {
      sim.reset();
      // The port may be briefly unavailable after the kill; SO_REUSEADDR makes that rare.
      for (int attempt = 0; attempt < 20 && !sim; ++attempt) {
        sim = start_sim(sim_bin, "127.0.0.1:" + std::to_string(sim_port), healthy_path,
                        options.seed + 1);
        if (!sim) std::this_thread::sleep_for(Millis(50));
      }
      if (sim) {
        sim_up = true;
        snapshot.sim_after = {0.0, 0.0};  // a fresh process counts from zero
      } else {
        trouble += "the sim did not restart for the recovery phase; ";
      }
    }
    read_gateways(snapshot);
  }
  load.join();  // every request ends by its due time + deadline + grace
  take_snapshot(snapshots[phases.size()], sim_up);

  for (Gateway* gateway : gateways) {
    if (!gateway->process->running())
      trouble += "the " + gateway->name + " gateway exited during the run; ";
  }
  print_report(schedule, phases, gateways, snapshots, options);
  if (!trouble.empty()) std::printf("\nnote: %s\n", trouble.c_str());
  if (options.keep_work) std::printf("work directory: %s\n", work.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_chaos: chain vs naive gateway while the cloud upstream fails in phases"};
  Options options;
  app.add_option("--rate", options.rate, "requests per second, per gateway")
      ->check(CLI::Range(0.5, 500.0));
  app.add_option("--seconds", options.seconds, "length of the five phases together")
      ->check(CLI::Range(5.0, 3600.0));
  app.add_option("--deadline-ms", options.deadline_ms, "X-Hengshi-Deadline-Ms of every request")
      ->check(CLI::Range(100, 600'000));
  app.add_option("--stream-share", options.stream_share, "share of streaming requests")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--faq-share", options.faq_share, "share of FAQ (edge) questions")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--grace-ms", options.grace_ms, "the client gives up at deadline + this")
      ->check(CLI::Range(0, 60'000));
  app.add_option("--seed", options.seed, "seed of the schedule and the sim");
  app.add_option("--build-dir", options.build_dir,
                 "build folder with src/cli/hengshi and tools/sim/hengshi-sim");
  app.add_option("--source-dir", options.source_dir, "source tree (data/demo_faq.jsonl)");
  app.add_option("--intent-model", options.intent_model,
                 "reuse this `hengshi train` output instead of training");
  app.add_option("--work-dir", options.work_dir,
                 "folder for configs, model and route input (kept; default: a temporary one)");
  app.add_flag("--keep-work", options.keep_work,
               "keep the temporary folder (configs, model, route input)");
  CLI11_PARSE(app, argc, argv);

  if (options.build_dir.empty()) {
    // bench_chaos lives in <build>/bench/.
    std::error_code ec;
    fs::path self = fs::canonical("/proc/self/exe", ec);
    options.build_dir = ec ? "build" : self.parent_path().parent_path().string();
  }
  if (options.source_dir.empty()) options.source_dir = HENGSHI_SOURCE_DIR;

  struct sigaction action {};
  action.sa_handler = kill_children_and_exit;
  sigemptyset(&action.sa_mask);
  for (int signal_number : {SIGINT, SIGTERM, SIGALRM}) sigaction(signal_number, &action, nullptr);
  // Watchdog: training, the phases, the drain and a generous margin.
  ::alarm(static_cast<unsigned>(options.seconds) +
          static_cast<unsigned>(options.deadline_ms / 1000) + 900);

  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_chaos: %s\n", error.what());
    return 2;
  }
}
