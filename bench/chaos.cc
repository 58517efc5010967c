// bench_chaos: how the gateway's answers hold up while its cloud upstreams fail, for the chain's
// default configuration and a naive one (no retries, no breakers, no offline mode, no last
// resort) under the identical request schedule, in the same run.
//
//   bench_chaos [--only NAME[,NAME...]] [--scale 1.0] [--deadline-ms 3000] [--seed 1]
//               [--build-dir DIR] [--source-dir DIR] [--intent-model DIR] [--work-dir DIR]
//
// Each scenario starts its own hengshi-sim and its own two gateways (chain, naive) on
// 127.0.0.1, sends a fixed-rate open-loop schedule to both (and, for the stream scenarios,
// straight to the sim as the baseline), and changes the sim at phase boundaries:
//   phases         normal → 30% errors → latency spike past the deadline → outage → recovery;
//                  one member per pool; 60% FAQ questions the demo edge answers, 40% cloud ones
//   errors-30%     one member per pool, every call failing with 30% chance
//   one-of-two     two members per pool, one of them failing 30% of calls
//   small-down     every call to cloud-small fails (500); cloud-large healthy
//   outage-60s     the sim killed for 60 s, then restarted: how soon the cloud answers again
//   ttft-spike     two members per pool, one whose first token comes past the deadline
//   streams        healthy streams: the first-token time hengshi adds over the sim called directly
//   stream-drops   30% of streams dropped after 2 events, before the commit point
// A 200 is not an answer: every table counts model answers (edge or cloud; L1's degraded edge
// answers shown apart) apart from the gateway's own canned replies and hand-offs, and from
// errors; the targets are stated on model answers of the questions only the cloud can answer.
// The last line says how many targets were met. Exit 0 whenever it ran (targets not met
// included); 2 when it could not run. Everything is bounded: each request by deadline + grace,
// the whole program by an alarm.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
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

#include "chaos_load.h"
#include "chaos_stats.h"
#include "child_guard.h"
#include "core/progress.h"
#include "support/child_process.h"
#include "support/http_client.h"

namespace {

using hengshi::bench::Clock;
using hengshi::bench::Outcome;
using hengshi::bench::PhaseStats;
using hengshi::bench::PhaseWindow;
using hengshi::bench::Planned;
using hengshi::bench::Question;
using hengshi::bench::Target;
using hengshi::testing::ChildProcess;
using Millis = std::chrono::milliseconds;
using nlohmann::json;
namespace fs = std::filesystem;

// Slots of bench/child_guard.h: the sims first (one, or one per target), then the two gateways.
enum Slot : std::size_t { kSim = 0, kChain = 5, kNaive = 6 };

std::unique_ptr<ChildProcess> start_process(const std::vector<std::string>& argv, std::size_t slot,
                                            const std::string& what) {
  try {
    auto child = std::make_unique<ChildProcess>(ChildProcess::start(argv, Millis(30'000)));
    hengshi::bench::track_child(slot, child->pid());
    return child;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_chaos: %s did not start: %s\n", what.c_str(), error.what());
    return nullptr;
  }
}

std::string dump_text(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }
json parse_lenient(const std::string& text) { return json::parse(text, nullptr, false); }

std::optional<hengshi::testing::HttpResult> http(int port, const std::string& method, const std::string& target,
                                                 const std::string& body = "", Millis timeout = Millis(1500)) {
  try {
    hengshi::testing::HttpRequest request;
    request.method = method;
    request.target = target;
    request.body = body;
    return hengshi::testing::http_call("127.0.0.1", port, request, timeout);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// ---------------------------------------------------------------------------------------------
struct Options {
  std::vector<std::string> only;
  double scale = 1.0;  // multiplies every scenario's length
  std::int64_t deadline_ms = 3000;
  std::int64_t grace_ms = 2000;
  std::uint64_t seed = 1;
  std::string build_dir;
  std::string source_dir;
  std::string intent_model;
  std::string work_dir;
};

// The sim's latency profile: healthy answers well inside the deadline.
json healthy(std::int64_t deadline_ms) {
  const std::int64_t p50 = std::min<std::int64_t>(300, deadline_ms / 10);
  const std::int64_t p95 = std::min<std::int64_t>(800, deadline_ms / 4);
  return {{"latency_ms", {{"p50", p50}, {"p95", p95}}},
          {"ttft_ms", {{"p50", p50 * 2 / 3}, {"p95", p95 * 2 / 3}}},
          {"tokens_per_s", 0},
          {"output_tokens", {{"min", 8}, {"max", 32}}}};
}

json with(json profile, const json& changes) {
  for (const auto& [key, value] : changes.items()) profile[key] = value;
  return profile;
}

// The sim model a gateway's member asks for: "<gateway>-<small|large>-m<i>", so a profile's
// per-model overrides can make one member (or one pool) misbehave.
std::string member_model(const std::string& gateway, const std::string& pool, int member) {
  return gateway + "-" + pool + "-m" + std::to_string(member);
}

// `changes` for member `member` of the pools named in `pools`, for both gateways.
json member_overrides(const json& base, const json& changes, const std::vector<std::string>& pools, int member) {
  json models = json::object();
  for (const char* gateway : {"chain", "naive"}) {
    for (const auto& pool : pools) models[member_model(gateway, pool, member)] = with(base, changes);
  }
  return models;
}

enum class Action { none, set_profile, kill_sim, restart_sim };

struct PhaseSpec {
  std::string name;
  std::string condition;
  double start_s = 0;
  double end_s = 0;
  Action action = Action::none;  // at the phase's start
  json profile;                  // for set_profile
};

struct Scenario {
  std::string name;
  std::string description;
  int members = 1;  // per pool
  json profile;     // the sim's at the start
  std::vector<PhaseSpec> phases;
  double rate = 20;  // requests per second, to each target
  double faq_share = 0;
  double stream_share = 0;
  bool direct = false;     // the sim called directly, as a baseline target
  std::string bad_member;  // whose share of first attempts is counted ("" = none)
  // One sim per target, all with the same seed: request i draws the same latencies everywhere,
  // so a target's added time is measured request by request against the direct call.
  bool sim_per_target = false;
};

struct Questions {
  std::vector<std::string> faq;
  std::vector<std::string> cloud;
};

// Per phase and target: stats over the cloud questions, and over the FAQ ones when there are.
struct PhaseResult {
  std::string name;
  std::map<std::string, PhaseStats> cloud;
  std::map<std::string, PhaseStats> faq;
  std::map<std::string, PhaseStats> all;
};

struct ScenarioResult {
  std::string name;
  bool ran = false;
  std::vector<PhaseResult> phases;
  std::map<std::string, std::optional<double>> recovery_s;  // outage-60s
  // sim_per_target: TTFT added over the direct call, request by request (p50, p95 in µs).
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> added_ttft_us;
  std::string trouble;
};

// ---------------------------------------------------------------------------------------------
// Questions: FAQ texts from the demo data that the router sends to the edge with high
// confidence, and open questions it sends to the cloud, checked with `hengshi route`.
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

std::optional<Questions> classify_questions(const std::string& hengshi_bin, const std::string& model_dir,
                                            const std::string& faq_path, const std::string& work,
                                            std::int64_t deadline_ms) {
  std::vector<std::string> faq_texts;
  {
    std::ifstream in(faq_path);
    std::string line;
    while (std::getline(in, line)) {
      json row = parse_lenient(line);
      if (row.is_object() && row.contains("text") && row["text"].is_string()) faq_texts.push_back(row["text"]);
    }
  }
  const std::string config_path = work + "/route.yaml";
  std::ofstream(config_path) << "edge: {intent_model: " << dump_text(json(model_dir)) << "}\n";
  const std::string input_path = work + "/route-input.jsonl";
  {
    std::ofstream input(input_path);
    for (const auto& text : faq_texts) input << dump_text(json{{"text", text}, {"deadline_ms", deadline_ms}}) << '\n';
    for (const auto& text : open_questions()) {
      input << dump_text(json{{"text", text}, {"deadline_ms", deadline_ms}}) << '\n';
    }
  }
  auto finished = ChildProcess::run({hengshi_bin, "route", "--config", config_path}, Millis(120'000), input_path);
  if (finished.exit_code != 0) {
    std::fprintf(stderr, "bench_chaos: hengshi route failed:\n%s\n", finished.output.c_str());
    return std::nullopt;
  }
  Questions questions;
  std::istringstream lines(finished.stdout_text);
  std::string line;
  while (std::getline(lines, line)) {
    json decision = parse_lenient(line);
    if (!decision.is_object() || !decision.contains("line") || !decision["line"].is_number_integer()) continue;
    const auto index = decision["line"].get<std::size_t>() - 1;
    const std::string route = decision.value("route", "");
    const std::string reason = decision.value("reason", "");
    if (index < faq_texts.size()) {
      // Only confident edge answers: a middle-band decision may consult the cloud as well.
      if (route == "edge" && reason == "high_confidence") questions.faq.push_back(faq_texts[index]);
    } else if (index - faq_texts.size() < open_questions().size() && route.rfind("cloud", 0) == 0) {
      questions.cloud.push_back(open_questions()[index - faq_texts.size()]);
    }
  }
  std::printf("questions: %zu of %zu FAQ texts route to the edge with high confidence; %zu of %zu open questions "
              "route to the cloud\n",
              questions.faq.size(), faq_texts.size(), questions.cloud.size(), open_questions().size());
  if (questions.faq.empty() || questions.cloud.empty()) {
    std::fprintf(stderr, "bench_chaos: need at least one edge FAQ question and one cloud question\n");
    return std::nullopt;
  }
  return questions;
}

// ---------------------------------------------------------------------------------------------
std::string gateway_yaml(const std::string& name, int sim_port, int members, const std::string& model_dir,
                         bool naive) {
  const std::string base_url = "http://127.0.0.1:" + std::to_string(sim_port) + "/v1";
  std::ostringstream yaml;
  yaml << "# bench_chaos: the " << name << " gateway\n"
       // One I/O thread each: two gateways, the sim and the load share a small machine.
       << "server: {listen: \"127.0.0.1:0\", admin_listen: \"127.0.0.1:0\", threads: 1, expose_figures: true}\n"
       << "log: {requests: \"\"}\n"
       // The chain is measured, not the cache: the same few questions repeat all run long.
       << "cache: {enabled: false}\n"
       << "edge: {intent_model: " << dump_text(json(model_dir)) << "}\n"
       << "pools:\n";
  for (const char* pool : {"small", "large"}) {
    yaml << "  cloud-" << pool << ": {members: [";
    for (int m = 0; m < members; ++m) {
      yaml << (m ? ", " : "") << "{name: m" << m << ", base_url: \"" << base_url
           << "\", model: " << member_model(name, pool, m) << "}";
    }
    yaml << "]}\n";
  }
  if (naive) {
    yaml << "chain: {retry: {enabled: false}, breaker: {enabled: false}, offline: {enabled: false}, "
            "last_resort: {kind: error}}\n";
  }
  return yaml.str();
}

struct Binaries {
  std::string hengshi;
  std::string sim;
};

class ScenarioRunner {
 public:
  ScenarioRunner(const Options& options, const Binaries& binaries, const std::string& model_dir,
                 const Questions& questions, const std::string& work)
      : options_(options), binaries_(binaries), model_dir_(model_dir), questions_(questions), work_(work) {}

  ScenarioResult run(const Scenario& scenario) {
    ScenarioResult result;
    result.name = scenario.name;
    const std::string dir = work_ + "/" + scenario.name;
    fs::create_directories(dir);
    profile_path_ = dir + "/sim-profile.json";
    std::ofstream(profile_path_) << scenario.profile.dump();
    sims_.clear();
    sim_ports_.clear();
    const std::size_t sim_count = scenario.sim_per_target ? (scenario.direct ? 3 : 2) : 1;
    for (std::size_t i = 0; i < sim_count; ++i) {
      sims_.push_back(start_sim(i, "127.0.0.1:0"));
      if (!sims_.back()) return result;
      sim_ports_.push_back(sims_.back()->port());
    }
    auto sim_port_for = [&](std::size_t target) { return sim_ports_[scenario.sim_per_target ? target : 0]; };

    std::vector<std::unique_ptr<ChildProcess>> gateways;
    std::vector<Target> targets;
    for (const char* name : {"chain", "naive"}) {
      const bool naive = std::string(name) == "naive";
      const std::string config = dir + "/" + name + ".yaml";
      std::ofstream(config) << gateway_yaml(name, sim_port_for(targets.size()), scenario.members, model_dir_, naive);
      auto gateway = start_process({binaries_.hengshi, "serve", "--config", config}, naive ? kNaive : kChain,
                                   std::string("hengshi serve (") + name + ")");
      if (!gateway) return result;
      targets.push_back(Target{name, gateway->port(), "auto", {}});
      gateways.push_back(std::move(gateway));
    }
    if (scenario.direct) targets.push_back(Target{"direct", sim_port_for(targets.size()), "direct-sim", {}});

    // Warm-up: one request of each kind the load sends, then zero the sim's counters.
    for (Target& target : targets) {
      Planned warm{Clock::duration::zero(), Question::cloud, questions_.cloud.front(), scenario.stream_share > 0.5};
      (void)http(target.port, "POST", "/v1/chat/completions", hengshi::bench::request_body(warm, target.model),
                 Millis(options_.deadline_ms + options_.grace_ms));
    }
    for (int port : sim_ports_) (void)http(port, "POST", "/admin/reset");

    const std::vector<Planned> schedule = make_schedule(scenario);
    const double length_s = scenario.phases.back().end_s;
    std::printf("\n== %s: %s\n   %.0f req/s to each of %zu targets for %.0f s; %.0f%% FAQ, %.0f%% streams; "
                "X-Hengshi-Deadline-Ms %lld\n",
                scenario.name.c_str(), scenario.description.c_str(), scenario.rate, targets.size(), length_s,
                100 * scenario.faq_share, 100 * scenario.stream_share, static_cast<long long>(options_.deadline_ms));
    for (const auto& phase : scenario.phases) {
      std::printf("   %-14s %5.1f–%5.1f s  %s\n", phase.name.c_str(), phase.start_s, phase.end_s,
                  phase.condition.c_str());
    }
    std::fflush(stdout);

    std::vector<Target*> pointers;
    for (Target& target : targets) pointers.push_back(&target);
    const Clock::time_point start = Clock::now() + Millis(200);
    std::thread load([&] {
      hengshi::bench::run_load(schedule, pointers, start, options_.deadline_ms,
                               Millis(options_.deadline_ms + options_.grace_ms));
    });
    for (std::size_t p = 1; p < scenario.phases.size(); ++p) {
      const PhaseSpec& phase = scenario.phases[p];
      std::this_thread::sleep_until(start + seconds(phase.start_s) - Millis(20));
      result.trouble += apply(phase);
    }
    load.join();  // every request ends by its due time + deadline + grace
    for (std::size_t g = 0; g < gateways.size(); ++g) {
      if (!gateways[g]->running()) result.trouble += targets[g].name + " gateway exited during the run; ";
    }

    for (const PhaseSpec& phase : scenario.phases) {
      PhaseResult phase_result;
      phase_result.name = phase.name;
      for (const Target& target : targets) {
        const PhaseWindow window{phase.start_s, phase.end_s};
        auto stats = [&](std::optional<Question> only) {
          return hengshi::bench::phase_stats(schedule, target.outcomes, window, options_.deadline_ms, only,
                                             scenario.bad_member);
        };
        phase_result.cloud[target.name] = stats(Question::cloud);
        phase_result.faq[target.name] = stats(Question::faq);
        phase_result.all[target.name] = stats(std::nullopt);
      }
      result.phases.push_back(std::move(phase_result));
    }
    if (scenario.sim_per_target && scenario.direct) {
      const Target& direct = targets.back();
      for (const Target& target : targets) {
        if (&target == &direct) continue;
        std::vector<std::int64_t> added;
        for (std::size_t i = 0; i < schedule.size(); ++i) {
          const Outcome& mine = target.outcomes[i];
          const Outcome& base = direct.outcomes[i];
          if (mine.ttft_us && base.ttft_us && mine.model_answer() && base.model_answer()) {
            added.push_back(*mine.ttft_us - *base.ttft_us);
          }
        }
        if (!added.empty()) {
          result.added_ttft_us[target.name] = {hengshi::bench::percentile(added, 0.50),
                                               hengshi::bench::percentile(added, 0.95)};
        }
      }
    }
    for (const PhaseSpec& phase : scenario.phases) {
      if (phase.action != Action::restart_sim) continue;
      for (const Target& target : targets) {
        result.recovery_s[target.name] =
            hengshi::bench::time_to_cloud_answers(schedule, target.outcomes, phase.start_s, phase.end_s, 0.95, 1.0);
      }
    }
    hengshi::bench::forget_children();
    sims_.clear();
    result.ran = true;
    return result;
  }

 private:
  static Clock::duration seconds(double s) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
  }

  std::unique_ptr<ChildProcess> start_sim(std::size_t index, const std::string& listen) {
    return start_process({binaries_.sim, "--listen", listen, "--profile", profile_path_, "--seed",
                          std::to_string(options_.seed), "--name", "chaos-sim"},
                         kSim + index, "hengshi-sim");
  }

  std::vector<Planned> make_schedule(const Scenario& scenario) const {
    std::mt19937_64 random(options_.seed);
    std::bernoulli_distribution is_faq(scenario.faq_share);
    std::bernoulli_distribution is_stream(scenario.stream_share);
    std::vector<Planned> schedule;
    const auto count = static_cast<std::size_t>(scenario.rate * scenario.phases.back().end_s);
    for (std::size_t i = 0; i < count; ++i) {
      Planned planned;
      planned.offset = seconds(static_cast<double>(i) / scenario.rate);
      planned.question = is_faq(random) ? Question::faq : Question::cloud;
      const auto& pool = planned.question == Question::faq ? questions_.faq : questions_.cloud;
      planned.text = pool[std::uniform_int_distribution<std::size_t>(0, pool.size() - 1)(random)];
      planned.stream = is_stream(random);
      schedule.push_back(std::move(planned));
    }
    return schedule;
  }

  // The phase's change to the sims; "" or what went wrong.
  std::string apply(const PhaseSpec& phase) {
    std::string trouble;
    for (std::size_t i = 0; i < sims_.size(); ++i) {
      switch (phase.action) {
        case Action::none:
          break;
        case Action::set_profile: {
          auto changed = http(sim_ports_[i], "POST", "/admin/profile", phase.profile.dump());
          if (!changed || changed->status != 200) trouble += "could not set the sim profile for " + phase.name + "; ";
          break;
        }
        case Action::kill_sim:
          sims_[i]->signal(SIGKILL);
          sims_[i]->wait(Millis(5000));
          hengshi::bench::track_child(kSim + i, 0);
          break;
        case Action::restart_sim:
          sims_[i].reset();
          // The port may be briefly unavailable after the kill; SO_REUSEADDR makes that rare.
          for (int attempt = 0; attempt < 20 && !sims_[i]; ++attempt) {
            sims_[i] = start_sim(i, "127.0.0.1:" + std::to_string(sim_ports_[i]));
            if (!sims_[i]) std::this_thread::sleep_for(Millis(50));
          }
          if (!sims_[i]) trouble += "the sim did not restart for " + phase.name + "; ";
          break;
      }
    }
    return trouble;
  }

  const Options& options_;
  const Binaries& binaries_;
  const std::string& model_dir_;
  const Questions& questions_;
  const std::string work_;
  std::string profile_path_;
  std::vector<std::unique_ptr<ChildProcess>> sims_;
  std::vector<int> sim_ports_;
};

// ---------------------------------------------------------------------------------------------
std::vector<Scenario> scenarios(const Options& options) {
  const std::int64_t deadline = options.deadline_ms;
  const double k = options.scale;
  const json base = healthy(deadline);
  const json spike = {{"latency_ms", {{"p50", deadline * 2}, {"p95", deadline * 3}}},
                      {"ttft_ms", {{"p50", deadline * 2}, {"p95", deadline * 3}}}};
  std::vector<Scenario> out;

  Scenario phases{"phases", "one member per pool; the sim goes through five phases", 1, base, {}, 20, 0.6, 0};
  const double s = 60 * k;
  phases.phases = {
      {"normal", "healthy sim", 0, 0.2 * s},
      {"errors-30%", "sim error_rate 0.3 (500)", 0.2 * s, 0.4 * s, Action::set_profile, with(base, {{"error_rate", 0.3}})},
      {"latency-spike", "sim latency/TTFT p50 " + std::to_string(2 * deadline) + " ms", 0.4 * s, 0.6 * s,
       Action::set_profile, with(base, spike)},
      {"outage", "sim killed: connection refused", 0.6 * s, 0.85 * s, Action::kill_sim},
      {"recovery", "sim restarted on the same port, healthy", 0.85 * s, s, Action::restart_sim},
  };
  out.push_back(phases);

  // The case the breakers used to turn into canned replies: every pool failing 30% of its calls.
  Scenario errors{"errors-30%", "one member per pool; every call fails with 30% chance (500)", 1,
                  with(base, {{"error_rate", 0.3}}), {}, 20};
  errors.phases = {{"errors-30%", "sim error_rate 0.3 (500) on both pools", 0, 30 * k}};
  out.push_back(errors);

  Scenario one_of_two{"one-of-two", "two members per pool; member m0 of each fails 30% of its calls", 2, base, {},
                      20, 0, 0, false, "m0"};
  one_of_two.profile["models"] = member_overrides(base, {{"error_rate", 0.3}}, {"small", "large"}, 0);
  one_of_two.phases = {{"errors-30%-m0", "m0 error_rate 0.3; m1 healthy", 0, 30 * k}};
  out.push_back(one_of_two);

  Scenario small_down{"small-down", "one member per pool; every call to cloud-small fails (500)", 1, base, {}, 20};
  small_down.profile["models"] = member_overrides(base, {{"error_rate", 1.0}}, {"small"}, 0);
  small_down.phases = {{"small-500", "cloud-small error_rate 1.0; cloud-large healthy", 0, 30 * k}};
  out.push_back(small_down);

  Scenario outage{"outage-60s", "one member per pool; the cloud is down for 60 s, then back", 1, base, {}, 20};
  outage.phases = {{"normal", "healthy sim", 0, 10 * k},
                   {"outage", "sim killed: connection refused", 10 * k, 10 * k + 60},
                   {"recovery", "sim restarted on the same port, healthy", 10 * k + 60, 10 * k + 60 + 20 * k,
                    Action::restart_sim}};
  outage.phases[1].action = Action::kill_sim;
  out.push_back(outage);

  Scenario ttft{"ttft-spike", "two members per pool; m0's first token (and answer) comes past the deadline", 2,
                base, {}, 20, 0, 0.5, false, "m0"};
  ttft.profile["models"] = member_overrides(base, spike, {"small", "large"}, 0);
  ttft.phases = {{"ttft-spike-m0", "m0 latency/TTFT p50 " + std::to_string(2 * deadline) + " ms; m1 healthy", 0,
                  30 * k}};
  out.push_back(ttft);

  // The first-token latency of a healthy streaming upstream, as the issue measured it.
  const json streaming = {{"ttft_ms", {{"p50", 180}, {"p95", 300}}},
                          {"latency_ms", {{"p50", 180}, {"p95", 300}}},
                          {"tokens_per_s", 60},
                          {"output_tokens", {{"min", 16}, {"max", 32}}}};
  Scenario streams{"streams", "healthy streams, against the sim called directly (one sim per target, same seed)",
                   1, streaming, {}, 4, 0, 1, true};
  streams.sim_per_target = true;
  streams.phases = {{"healthy", "TTFT p50 180 ms, p95 300 ms, 60 tokens/s", 0, 15 * k}};
  out.push_back(streams);

  Scenario drops{"stream-drops", "30% of streams dropped after 2 events (before the commit point)", 1, streaming,
                 {}, 5, 0, 1, true};
  drops.profile["disconnect_rate"] = 0.3;
  drops.profile["disconnect_after_chunks"] = 2;
  drops.phases = {{"drops-30%", "disconnect_rate 0.3 after 2 SSE events", 0, 30 * k}};
  out.push_back(drops);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Report.
std::string percent(double share) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.1f", 100.0 * share);
  return text;
}

std::string ms(std::optional<std::int64_t> us) {
  if (!us) return "-";
  char text[16];
  std::snprintf(text, sizeof(text), "%.0f", static_cast<double>(*us) / 1000.0);
  return text;
}

std::string fixed2(double value) {
  char text[16];
  std::snprintf(text, sizeof(text), "%.2f", value);
  return text;
}

void print_table(const Scenario& scenario, const ScenarioResult& result) {
  std::printf("   %-14s %-6s %5s %7s %6s %7s %7s %8s %8s %6s %6s %6s %6s %6s %6s", "phase", "target", "n", "model%",
              "L1%", "canned%", "error%", "in-ddl%", "att/req", "p50ms", "p95ms", "p99ms", "ttft50", "ttft95",
              "held%");
  if (!scenario.bad_member.empty()) std::printf(" %7s", ("1st@" + scenario.bad_member + "%").c_str());
  std::printf(" %9s %7s\n", "small/req", "large%");
  auto row = [&](const std::string& phase, const std::string& target, const PhaseStats& s) {
    std::printf("   %-14s %-6s %5zu %7s %6s %7s %7s %8s %8s %6s %6s %6s %6s %6s %6s", phase.c_str(), target.c_str(),
                s.requests, percent(s.share(s.model)).c_str(), percent(s.share(s.degraded_edge)).c_str(),
                percent(s.share(s.canned)).c_str(), percent(s.share(s.errors)).c_str(),
                percent(s.share(s.model_in_deadline)).c_str(), fixed2(s.per_request(s.attempts)).c_str(),
                ms(s.p50_us).c_str(), ms(s.p95_us).c_str(), ms(s.p99_us).c_str(), ms(s.ttft_p50_us).c_str(),
                ms(s.ttft_p95_us).c_str(),
                s.streams ? percent(static_cast<double>(s.held) / static_cast<double>(s.streams)).c_str() : "-");
    if (!scenario.bad_member.empty()) {
      std::printf(" %7s", s.first_attempts ? percent(static_cast<double>(s.first_at_bad) /
                                                     static_cast<double>(s.first_attempts))
                                                 .c_str()
                                           : "-");
    }
    std::printf(" %9s %7s\n", fixed2(s.per_request(s.calls_small)).c_str(),
                percent(s.share(s.from_cloud_large)).c_str());
  };
  for (const PhaseResult& phase : result.phases) {
    bool first = true;
    for (const auto& [target, stats] : phase.cloud) {
      row(first ? phase.name : "", target, stats);
      first = false;
    }
    if (scenario.faq_share > 0) {
      for (const auto& [target, stats] : phase.faq) row("  (FAQ)", target, stats);
    }
  }
  for (const auto& [target, added] : result.added_ttft_us) {
    std::printf("   added TTFT: %-6s p50 %.2f ms, p95 %.2f ms over the direct call, request by request\n", target.c_str(),
                static_cast<double>(added.first) / 1000.0, static_cast<double>(added.second) / 1000.0);
  }
  for (const auto& [target, seconds] : result.recovery_s) {
    std::printf("   recovery: %-6s the cloud answers >= 95%% of cloud questions from %s s after the sim is back\n",
                target.c_str(), seconds ? fixed2(*seconds).c_str() : "never (in this run)");
  }
  if (!result.trouble.empty()) std::printf("   note: %s\n", result.trouble.c_str());
}

struct TargetLine {
  std::string text;
  std::string chain;
  std::string naive;
  bool met = false;
};

const PhaseStats* stats_of(const std::vector<ScenarioResult>& results, const std::string& scenario,
                           const std::string& phase, const std::string& target, bool cloud = true) {
  for (const auto& result : results) {
    if (result.name != scenario || !result.ran) continue;
    for (const auto& p : result.phases) {
      if (p.name != phase) continue;
      const auto& map = cloud ? p.cloud : p.all;
      auto it = map.find(target);
      return it == map.end() ? nullptr : &it->second;
    }
  }
  return nullptr;
}

std::vector<TargetLine> targets(const std::vector<ScenarioResult>& results) {
  std::vector<TargetLine> lines;
  // A target over one stat of one phase, for the chain (judged) and the naive config (shown).
  auto add = [&](const std::string& text, const std::string& scenario, const std::string& phase,
                 const std::function<double(const PhaseStats&)>& value, const std::function<bool(double)>& ok,
                 const std::function<std::string(double)>& show, bool cloud = true) {
    const PhaseStats* chain = stats_of(results, scenario, phase, "chain", cloud);
    const PhaseStats* naive = stats_of(results, scenario, phase, "naive", cloud);
    if (chain == nullptr) return;
    TargetLine line{text, show(value(*chain)), naive ? show(value(*naive)) : "-", ok(value(*chain))};
    lines.push_back(line);
  };
  auto pct = [](double v) { return percent(v) + "%"; };
  auto model = [](const PhaseStats& s) { return s.share(s.model); };
  auto attempts = [](const PhaseStats& s) { return s.per_request(s.attempts); };

  add("errors-30%, one member per pool: >= 97% model answers", "errors-30%", "errors-30%", model,
      [](double v) { return v >= 0.97; }, pct);
  add("errors-30%, one member per pool: attempts/request <= 1.5", "errors-30%", "errors-30%", attempts,
      [](double v) { return v <= 1.5; }, fixed2);
  add("errors-30% on one of two members: >= 99.5% model answers", "one-of-two", "errors-30%-m0", model,
      [](double v) { return v >= 0.995; }, pct);
  add("errors-30% on one of two members: attempts/request <= 1.2", "one-of-two", "errors-30%-m0", attempts,
      [](double v) { return v <= 1.2; }, fixed2);
  add("errors-30% on one of two members: bad member <= 20% of first attempts", "one-of-two", "errors-30%-m0",
      [](const PhaseStats& s) {
        return s.first_attempts ? static_cast<double>(s.first_at_bad) / static_cast<double>(s.first_attempts) : 1.0;
      },
      [](double v) { return v <= 0.20; }, pct);
  add("100% 5xx on cloud-small: cloud-large answers >= 99%", "small-down", "small-500",
      [](const PhaseStats& s) { return s.share(s.from_cloud_large); }, [](double v) { return v >= 0.99; }, pct);
  add("100% 5xx on cloud-small: calls to cloud-small <= 1.1 per request", "small-down", "small-500",
      [](const PhaseStats& s) { return s.per_request(s.calls_small); }, [](double v) { return v <= 1.1; }, fixed2);
  for (const auto& result : results) {
    if (result.name != "outage-60s" || !result.ran) continue;
    auto show = [](const std::optional<double>& s) { return s ? fixed2(*s) + " s" : std::string("never"); };
    auto chain = result.recovery_s.find("chain");
    auto naive = result.recovery_s.find("naive");
    if (chain == result.recovery_s.end()) continue;
    lines.push_back({"after a 60 s outage: >= 95% answers from the cloud within 10 s", show(chain->second),
                     naive != result.recovery_s.end() ? show(naive->second) : "-",
                     chain->second && *chain->second <= 10.0});
  }
  // The existing phases (issue 9's targets), read on every request of the phase.
  add("outage: >= 99.9% answered within the deadline (model or canned)", "phases", "outage",
      [](const PhaseStats& s) { return s.share(s.answered_in_deadline); }, [](double v) { return v >= 0.999; },
      pct, false);
  add("outage: upstream calls per cloud question <= 1.2", "phases", "outage",
      [](const PhaseStats& s) { return s.per_request(s.calls_small + s.calls_large); },
      [](double v) { return v <= 1.2; }, fixed2);
  for (const auto& result : results) {
    if (result.name != "streams" || !result.ran) continue;
    auto show = [&](const std::string& target, bool p95) {
      auto it = result.added_ttft_us.find(target);
      if (it == result.added_ttft_us.end()) return std::string("-");
      return fixed2(static_cast<double>(p95 ? it->second.second : it->second.first) / 1000.0) + " ms";
    };
    auto chain = result.added_ttft_us.find("chain");
    lines.push_back({"healthy streams: added TTFT p50 <= 10 ms over the direct sim", show("chain", false),
                     show("naive", false),
                     chain != result.added_ttft_us.end() && chain->second.first <= 10'000});
    lines.push_back({"healthy streams: added TTFT p95 (no target)", show("chain", true), show("naive", true), true});
  }
  add("streams with 30% drops: >= 99% arrive complete from a model", "stream-drops", "drops-30%", model,
      [](double v) { return v >= 0.99; }, pct);
  return lines;
}

// ---------------------------------------------------------------------------------------------
int run(const Options& options) {
  const fs::path build(options.build_dir);
  const Binaries binaries{(build / "src/cli/hengshi").string(), (build / "tools/sim/hengshi-sim").string()};
  for (const auto& binary : {binaries.hengshi, binaries.sim}) {
    if (::access(binary.c_str(), X_OK) != 0) {
      std::fprintf(stderr, "bench_chaos: %s is missing (build hengshi and hengshi-sim first)\n", binary.c_str());
      return 2;
    }
  }
  const std::string faq_path = (fs::path(options.source_dir) / "data/demo_faq.jsonl").string();
  std::string work = options.work_dir;
  bool remove_at_end = false;
  if (work.empty()) {
    std::string work_template = (fs::temp_directory_path() / "hengshi-chaos-XXXXXX").string();
    if (::mkdtemp(work_template.data()) == nullptr) {
      std::fprintf(stderr, "bench_chaos: cannot create a work directory\n");
      return 2;
    }
    work = work_template;
    remove_at_end = true;
  }
  fs::create_directories(work);
  struct RemoveWork {
    std::string path;
    bool remove;
    ~RemoveWork() {
      std::error_code ec;
      if (remove) fs::remove_all(path, ec);
    }
  } remove_work{work, remove_at_end};

  std::string model_dir = options.intent_model;
  if (model_dir.empty()) {
    model_dir = work + "/model";
    const auto started = Clock::now();
    auto trained = ChildProcess::run({binaries.hengshi, "train", "--data", faq_path, "--out", model_dir},
                                     Millis(600'000));
    if (trained.exit_code != 0) {
      std::fprintf(stderr, "bench_chaos: hengshi train failed:\n%s\n", trained.output.c_str());
      return 2;
    }
    std::printf("trained the demo intent model in %.1f s\n",
                std::chrono::duration<double>(Clock::now() - started).count());
  }
  auto questions = classify_questions(binaries.hengshi, model_dir, faq_path, work, options.deadline_ms);
  if (!questions) return 2;
  std::printf("chain: the default chain settings; naive: chain.retry/breaker/offline off, last_resort error\n"
              "binaries: %s\n",
              options.build_dir.c_str());
  std::printf("columns (cloud questions unless marked FAQ): model%% = valid 200s from a model (edge or cloud), "
              "L1%% = of which the degraded edge LLM, canned%% = the gateway's own reply or hand-off, error%% = "
              "anything else; in-ddl%% = model answers within the deadline; att/req = hengshi.attempts per "
              "request; latency from the due time; ttft = first content piece (streams); held%% = streams held to "
              "the commit point; small/req = attempts at cloud-small per request; large%% = answered by "
              "cloud-large\n");

  ScenarioRunner runner(options, binaries, model_dir, *questions, work);
  std::vector<ScenarioResult> results;
  const auto all = scenarios(options);
  hengshi::Progress progress("bench_chaos: scenarios", all.size());
  for (const Scenario& scenario : all) {
    progress.advance();
    if (!options.only.empty() &&
        std::find(options.only.begin(), options.only.end(), scenario.name) == options.only.end()) {
      continue;
    }
    results.push_back(runner.run(scenario));
    if (results.back().ran) print_table(scenario, results.back());
    std::fflush(stdout);
  }

  const auto lines = targets(results);
  std::printf("\n%-70s %-14s %-5s %s\n", "targets (the chain's config; naive shown for comparison)", "chain", "", "naive");
  std::size_t met = 0;
  for (const auto& line : lines) {
    std::printf("%-70s %-14s %-5s %s\n", line.text.c_str(), line.chain.c_str(), line.met ? "met" : "NOT", line.naive.c_str());
    if (line.met) ++met;
  }
  std::printf("bench_chaos: %zu of %zu targets met, on model answers\n", met, lines.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_chaos: chain vs naive gateway while hengshi-sim fails, scenario by scenario"};
  Options options;
  app.add_option("--only", options.only, "run only these scenarios")->delimiter(',');
  app.add_option("--scale", options.scale, "multiplies each scenario's length (the 60 s outage stays 60 s)")
      ->check(CLI::Range(0.1, 10.0));
  app.add_option("--deadline-ms", options.deadline_ms, "X-Hengshi-Deadline-Ms of every request")
      ->check(CLI::Range(500, 600'000));
  app.add_option("--grace-ms", options.grace_ms, "the client gives up at deadline + this")->check(CLI::Range(0, 60'000));
  app.add_option("--seed", options.seed, "seed of the schedules and the sim");
  app.add_option("--build-dir", options.build_dir, "build folder with src/cli/hengshi and tools/sim/hengshi-sim");
  app.add_option("--source-dir", options.source_dir, "source tree (data/demo_faq.jsonl)");
  app.add_option("--intent-model", options.intent_model, "reuse this `hengshi train` output instead of training");
  app.add_option("--work-dir", options.work_dir, "folder for configs, model and logs (kept)");
  CLI11_PARSE(app, argc, argv);

  if (options.build_dir.empty()) {
    std::error_code ec;
    fs::path self = fs::canonical("/proc/self/exe", ec);  // bench_chaos lives in <build>/bench/
    options.build_dir = ec ? "build" : self.parent_path().parent_path().string();
  }
  if (options.source_dir.empty()) options.source_dir = HENGSHI_SOURCE_DIR;

  // Watchdog: training, every scenario at its scale, the drains and a generous margin.
  hengshi::bench::kill_children_on_exit("bench_chaos", static_cast<unsigned>(330 * options.scale) + 60 + 900);

  try {
    return run(options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_chaos: %s\n", error.what());
    return 2;
  }
}
