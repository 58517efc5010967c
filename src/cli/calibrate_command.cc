#include "cli/calibrate_command.h"

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "edge/intent_engine.h"
#include "router/calibrate.h"
#include "router/thresholds.h"

namespace hengshi::cli {
namespace {

struct CalibrateArgs {
  std::string model;
  std::string data;
  std::string out;
  double target_precision = 0.97;
  std::size_t min_support = 20;
  std::string default_task_type = "faq";
};

int fail(const std::string& message) {
  std::fprintf(stderr, "hengshi calibrate: %s\n", message.c_str());
  return 2;
}

int run_calibrate(const CalibrateArgs& args) {
  // Checked here rather than with CLI::Range so a bad value exits 2 like every other error, and
  // so the open end at 0 is stated exactly.
  if (!(args.target_precision > 0 && args.target_precision <= 1)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", args.target_precision);
    return fail(std::string("--target-precision must be in (0, 1] (got ") + got + ")");
  }
  if (args.min_support == 0) return fail("--min-support must be at least 1");

  auto rows = router::read_calibration_rows(args.data);
  if (!rows) return fail(rows.error().message);
  auto engine = edge::IntentEngine::load(args.model);
  if (!engine) return fail("model refused: " + engine.error().message);

  router::CalibrateOptions options;
  options.target_precision = args.target_precision;
  options.min_support = args.min_support;
  options.default_task_type = args.default_task_type;
  auto report = router::calibrate_thresholds(**engine, *rows, options);
  if (!report) return fail(report.error().message);

  std::fputs(router::format_calibrate_report(*report).c_str(), stdout);
  if (Status written = router::write_thresholds_file(report->file, args.out); !written) {
    return fail(written.error().message);
  }
  std::printf("\nthresholds %s written to %s\n", report->file.version.c_str(), args.out.c_str());
  return 0;
}

}  // namespace

void add_calibrate_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<CalibrateArgs>();
  CLI::App* calibrate = app.add_subcommand(
      "calibrate", "Fit the router's confidence thresholds for an intent model on labelled rows");
  calibrate->add_option("--model", args->model, "intent model directory (hengshi train --out)")
      ->required();
  calibrate
      ->add_option("--data", args->data,
                   "held-out rows {\"text\", \"intent\", \"task_type\"?}; __oos__ = out of scope")
      ->required();
  calibrate
      ->add_option("--target-precision", args->target_precision,
                   "edge precision each band's high must reach, in (0, 1]")
      ->required();
  calibrate->add_option("--out", args->out, "thresholds file to write (replaced atomically)")
      ->required();
  calibrate->add_option("--min-support", args->min_support,
                        "rows a task type or intent needs for a band of its own (default 20)");
  calibrate->add_option("--default-task-type", args->default_task_type,
                        "task type of rows without one (default faq)");
  calibrate->callback([args, &exit_code] { exit_code = run_calibrate(*args); });
}

}  // namespace hengshi::cli
