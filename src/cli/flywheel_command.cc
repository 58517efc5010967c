#include "cli/flywheel_command.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/command_failure.h"
#include "edge/flywheel.h"
#include "edge/text_normalizer.h"
#include "obs/request_log_reader.h"
#include "router/router_policy.h"

namespace hengshi::cli {
namespace {

struct FlywheelArgs {
  std::vector<std::string> logs;
  std::string out;
  double review_share = 0.05;
  std::uint64_t seed = 1;
  std::string policy;
};

int flywheel_failed(const std::string& message) {
  return command_failed("hengshi flywheel export", message);
}

int run_export(const FlywheelArgs& args) {
  if (!(args.review_share > 0 && args.review_share <= 1))
    return flywheel_failed("--review-sample must be in (0, 1]");
  // The policy's PII patterns (the embedded policy's without --policy): the same detector that
  // kept these texts out of the cloud keeps them out of training.
  auto policy = router::load_router_policy(args.policy, "");
  if (!policy) return flywheel_failed("--policy: " + policy.error().message);
  std::vector<obs::LoggedRequest> rows;
  obs::LogReadStats stats;
  if (Status read = obs::read_request_log_files(args.logs, rows, stats); !read)
    return flywheel_failed(read.error().message);
  const edge::TextNormalizer normalizer;
  edge::FlywheelOptions options;
  options.review_share = args.review_share;
  options.seed = args.seed;
  options.has_pii = [&](std::string_view text) { return (*policy)->pii.contains(text); };
  options.normalise = [&](std::string_view text) { return normalizer.normalize(text); };
  const edge::FlywheelExport selected = edge::select_flywheel_rows(rows, options);
  if (auto written = edge::write_flywheel_export(selected, args.out); !written)
    return flywheel_failed(written.error().message);
  std::printf("flywheel export: %zu request(s) read, %zu cloud model answer(s) with text\n", stats.requests,
              selected.considered);
  std::printf("  %zu training row(s) -> %s\n", selected.rows.size(), args.out.c_str());
  std::printf("  %zu row(s) to review -> %s (mark each \"verdict\": \"ok\" or \"bad\" before `hengshi train`)\n",
              selected.review.size(), edge::review_path_of(args.out).c_str());
  std::printf("  %zu good answer(s) without an intent -> %s.unlabelled.jsonl\n", selected.unlabelled.size(),
              args.out.c_str());
  std::printf("  dropped: %zu with PII, %zu duplicate(s)\n", selected.dropped_pii, selected.dropped_duplicates);
  return 0;
}

}  // namespace

void add_flywheel_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<FlywheelArgs>();
  CLI::App* flywheel = app.add_subcommand("flywheel", "Turn good cloud answers into edge training rows");
  flywheel->require_subcommand(1);
  CLI::App* exporter = flywheel->add_subcommand("export", "Export training rows and a review sample from request logs");
  exporter->add_option("--log", args->logs, "request log file(s), schema 1, written with log.text on")
      ->required()
      ->check(CLI::ExistingFile);
  exporter->add_option("--out", args->out, "training rows to write (JSON Lines); the review file goes beside it")
      ->required();
  exporter->add_option("--review-sample", args->review_share, "share of rows a person reviews (at least one row)");
  exporter->add_option("--seed", args->seed, "seed of the review sample");
  exporter->add_option("--policy", args->policy, "routing policy YAML whose PII patterns apply (default: embedded)")
      ->check(CLI::ExistingFile);
  exporter->callback([args, &exit_code] { exit_code = run_export(*args); });
}

}  // namespace hengshi::cli
