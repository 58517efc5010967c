#include "cli/edge_command.h"

#include <cstdio>
#include <memory>

#ifdef HENGSHI_HAVE_LLAMA
#include "edge/llm_gate.h"
#endif

namespace hengshi::cli {
namespace {

#ifdef HENGSHI_HAVE_LLAMA
void print_side(const char* name, const edge::GateSide& side) {
  std::printf("%-10s %-6s %-34s %5d %8.3f %7.2f %10.1f\n", name, side.kind.c_str(), side.version.c_str(),
              side.rows, side.f1, side.exact, side.tokens_per_second);
}

int run_gate_command(const edge::GateOptions& options) {
  auto report = edge::run_gate(options);
  if (!report) {
    std::fprintf(stderr, "hengshi edge gate: %s: %s\n", report.error().code.c_str(),
                 report.error().message.c_str());
    return 2;
  }
  std::printf("%-10s %-6s %-34s %5s %8s %7s %10s\n", "", "kind", "version", "rows", "F1", "exact", "tok/s");
  print_side("baseline", report->baseline);
  print_side("candidate", report->candidate);
  for (const auto& reason : report->verdict.reasons) std::printf("  worse: %s\n", reason.c_str());
  std::printf("gate: %s (tolerance: F1 %.3f, speed %.0f%%)\n", report->verdict.passed ? "PASS" : "FAIL",
              options.tolerance.f1, options.tolerance.speed * 100);
  return report->verdict.passed ? 0 : 1;
}
#endif

}  // namespace

void add_edge_command(CLI::App& app, int& exit_code) {
  CLI::App* edge = app.add_subcommand("edge", "The edge LLM's lifecycle: gate a fine-tuned candidate");
  edge->require_subcommand(1);
#ifdef HENGSHI_HAVE_LLAMA
  auto options = std::make_shared<edge::GateOptions>();
  CLI::App* gate = edge->add_subcommand(
      "gate", "Compare a candidate with the baseline on a regression set; exit 1 when it is worse");
  gate->add_option("--candidate", options->candidate_dir, "finetune output directory")->required();
  gate->add_option("--baseline", options->baseline_dir, "finetune output directory now serving")->required();
  gate->add_option("--data", options->data_path, "regression rows (as finetune reads them)")->required();
  gate->add_option("--f1-tolerance", options->tolerance.f1, "how much lower the candidate's F1 may be");
  gate->add_option("--speed-tolerance", options->tolerance.speed, "how much slower (share) it may generate");
  gate->add_option("--threads", options->threads, "compute threads (0 = all cores)");
  gate->add_option("--max-rows", options->max_rows, "score at most this many rows (0 = all)");
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
