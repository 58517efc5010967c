#include "cli/edge_command.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/admin_client.h"
#include "edge/edge_control.h"
#include "edge/serving_state.h"
#include "core/json_text.h"

#ifdef HENGSHI_HAVE_LLAMA
#include "edge/llm_gate.h"
#endif

namespace hengshi::cli {
namespace {

// One line for a serving state of the history: "base.gguf + faq@<version>".
std::string serving_line(const nlohmann::json& state) {
  auto parsed = edge::ServingState::from_json(state);
  return parsed ? parsed->describe() : std::string("?");
}

// What the promote / rollback / status commands send to the running gateway's admin listener.
struct AdminOptions {
  std::string admin = "127.0.0.1:8081";
  std::string token_env = "HENGSHI_ADMIN_TOKEN";
  int timeout_s = 1800;  // a promotion runs the gate: minutes on a big regression set
  std::string by;
  edge::PromoteRequest promote;
};

void add_admin_options(CLI::App* command, AdminOptions& options) {
  command->add_option("--admin", options.admin, "the gateway's admin listener, HOST:PORT (server.admin_listen)");
  command->add_option("--token-env", options.token_env, "env var holding the admin token (server.admin_token_env)");
  command->add_option("--timeout", options.timeout_s, "seconds to wait for the answer");
}

std::string who(const AdminOptions& options) {
  if (!options.by.empty()) return options.by;
  const char* user = std::getenv("USER");
  return std::string(user != nullptr && *user != '\0' ? user : "unknown") + " (hengshi edge)";
}

// A figure of the gate's table, "-" when it was not measured (null).
std::string figure(const nlohmann::json& value, const char* format) {
  if (!value.is_number()) return "-";
  char text[32];
  std::snprintf(text, sizeof text, format, value.get<double>());
  return text;
}

// The gate's table (gate_json()), from `hengshi edge gate` or a promotion's history entry.
void print_gate(const nlohmann::json& gate) {
  if (!gate.is_object()) return;
  const auto& t = gate["tolerance"];
  std::printf("gate on %s: %d rows, %d out of scope; tolerance F1 %.3f, intent %.2f, refusals %.2f, speed %.0f%%\n",
              gate.value("data", "").c_str(), gate.value("rows", 0), gate.value("oos_rows", 0), t.value("f1", 0.0),
              t.value("agreement", 0.0), t.value("refusal", 0.0), 100 * t.value("speed", 0.0));
  std::printf("intent agreement judged against: %s\n", gate.value("intent_reference", "labels").c_str());
  std::printf("  %-10s %-5s %-48s %7s %6s %7s %7s %9s\n", "", "kind", "version", "F1", "exact", "intent", "refuse",
              "tok/s");
  for (const char* side : {"baseline", "candidate"}) {
    const auto& s = gate[side];
    std::printf("  %-10s %-5s %-48s %7s %6s %7s %7s %9s\n", side, s.value("kind", "").c_str(),
                s.value("version", "").c_str(), figure(s["f1"], "%.3f").c_str(), figure(s["exact"], "%.2f").c_str(),
                figure(s["intent_agreement"], "%.2f").c_str(), figure(s["refusal_rate"], "%.2f").c_str(),
                figure(s["tokens_per_second"], "%.1f").c_str());
  }
  for (const auto& reason : gate["reasons"]) std::printf("  worse: %s\n", reason.get<std::string>().c_str());
}

// Exit 0 when it took, 1 when refused (the gate, a bad candidate), 2 when it could not be asked.
int call_admin(const AdminOptions& options, const std::string& method, const std::string& target,
               const nlohmann::json& body, const char* name) {
  const char* token = options.token_env.empty() ? nullptr : std::getenv(options.token_env.c_str());
  auto reply = admin_call(options.admin, method, target, body.is_null() ? "" : dump_text(body),
                          token != nullptr ? token : "", std::chrono::seconds(options.timeout_s));
  if (!reply) {
    std::fprintf(stderr, "hengshi edge %s: %s: %s\n", name, reply.error().code.c_str(), reply.error().message.c_str());
    return 2;
  }
  const auto json = nlohmann::json::parse(reply->body, nullptr, false);
  if (json.is_discarded()) {
    std::fprintf(stderr, "hengshi edge %s: HTTP %d: %s\n", name, reply->status, reply->body.c_str());
    return 2;
  }
  if (method == "GET") {
    std::printf("%s\n", json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return reply->status == 200 ? 0 : 2;
  }
  const nlohmann::json entry = json.value("entry", nlohmann::json());
  if (entry.is_object()) {
    print_gate(entry.value("gate", nlohmann::json()));
    std::printf("serving before: %s\n", serving_line(entry["from"]).c_str());
    std::printf("serving now:    %s\n", serving_line(entry["to"]).c_str());
  }
  if (reply->status == 200) {
    std::printf("%s (load %.0f ms, swap %.3f ms)\n", json.value("status", "").c_str(), entry.value("load_ms", 0.0),
                entry.value("swap_ms", 0.0));
    if (json.contains("warning")) std::fprintf(stderr, "warning: %s\n", json.value("warning", "").c_str());
    return 0;
  }
  const auto& error = json.contains("error") ? json["error"] : json;
  std::fprintf(stderr, "hengshi edge %s: HTTP %d %s: %s\n", name, reply->status, error.value("code", "").c_str(),
               error.value("message", "").c_str());
  return reply->status == 422 ? 1 : 2;
}

#ifdef HENGSHI_HAVE_LLAMA
int run_gate_command(const edge::GateOptions& options) {
  auto report = edge::run_gate(options);
  if (!report) {
    std::fprintf(stderr, "hengshi edge gate: %s: %s\n", report.error().code.c_str(),
                 report.error().message.c_str());
    return 2;
  }
  print_gate(report->table);
  std::printf("gate: %s\n", report->verdict.passed ? "PASS" : "FAIL");
  return report->verdict.passed ? 0 : 1;
}
#endif

}  // namespace

void add_edge_command(CLI::App& app, int& exit_code) {
  CLI::App* edge = app.add_subcommand(
      "edge", "The edge LLM's lifecycle: gate a fine-tuned candidate, promote it, roll back");
  edge->require_subcommand(1);
  auto admin = std::make_shared<AdminOptions>();
  CLI::App* promote = edge->add_subcommand(
      "promote", "Ask a running gateway to gate DIR against what serves and, when it passes, serve it");
  promote->add_option("dir", admin->promote.dir, "finetune output directory (as the gateway sees the path)")->required();
  promote->add_option("--task", admin->promote.task, "the task type a LoRA adapter serves");
  promote->add_option("--data", admin->promote.data, "regression set (default edge.llm.gate.data)");
  promote->add_option("--by", admin->by, "who promotes, for the history (default $USER)");
  add_admin_options(promote, *admin);
  promote->callback([admin, &exit_code] {
    nlohmann::json body = {{"dir", admin->promote.dir}, {"by", who(*admin)}};
    if (!admin->promote.task.empty()) body["task"] = admin->promote.task;
    if (!admin->promote.data.empty()) body["data"] = admin->promote.data;
    exit_code = call_admin(*admin, "POST", "/admin/edge/promote", body, "promote");
  });
  CLI::App* rollback = edge->add_subcommand("rollback", "Ask a running gateway to serve the version before");
  rollback->add_option("--by", admin->by, "who rolls back, for the history (default $USER)");
  add_admin_options(rollback, *admin);
  rollback->callback([admin, &exit_code] {
    exit_code = call_admin(*admin, "POST", "/admin/edge/rollback", {{"by", who(*admin)}}, "rollback");
  });
  CLI::App* status = edge->add_subcommand("status", "What a running gateway's edge LLM serves (GET /admin/edge)");
  add_admin_options(status, *admin);
  status->callback([admin, &exit_code] { exit_code = call_admin(*admin, "GET", "/admin/edge", nullptr, "status"); });
#ifdef HENGSHI_HAVE_LLAMA
  auto options = std::make_shared<edge::GateOptions>();
  CLI::App* gate = edge->add_subcommand(
      "gate", "Compare a candidate with the baseline on a regression set; exit 1 when it is worse");
  gate->add_option("--candidate", options->candidate_dir, "finetune output directory")->required();
  gate->add_option("--baseline", options->baseline_dir, "finetune output directory now serving")->required();
  gate->add_option("--data", options->data_path, "regression rows (as finetune reads them)")->required();
  gate->add_option("--f1-tolerance", options->tolerance.f1, "how much lower the candidate's F1 may be");
  gate->add_option("--speed-tolerance", options->tolerance.speed, "how much slower (share) it may generate");
  gate->add_option("--agreement-tolerance", options->tolerance.agreement,
                   "how much less often its answers may match the question's intent");
  gate->add_option("--refusal-tolerance", options->tolerance.refusal,
                   "how much less often it may refuse out-of-scope (__oos__) rows");
  gate->add_option("--refusal", options->refusal, "refusal text when no __oos__ row gives one");
  gate->add_option("--threads", options->threads, "compute threads (0 = all cores)");
  gate->add_option("--max-rows", options->max_rows, "score at most this many rows (0 = all)");
  gate->add_option("--intent-model", options->intent_model,
                   "intent model directory: judge intent agreement against its predictions (as the "
                   "gateway does with edge.intent_model), not the labels");
  gate->add_flag("!--runtime-adapters", options->merge_adapters,
                 "apply LoRA adapters at every token, as with edge.llm.merge_adapters: false "
                 "(default: merged into the base, as served by default)");
  gate->callback([options, &exit_code] { exit_code = run_gate_command(*options); });
#else
  CLI::App* gate = edge->add_subcommand("gate", "needs llama.cpp");
  gate->allow_extras();
  gate->callback([&exit_code] {
    std::fprintf(stderr, "hengshi edge gate: this build has no llama.cpp (run scripts/fetch-llama)\n");
    exit_code = 2;
  });
#endif
}

}  // namespace hengshi::cli
