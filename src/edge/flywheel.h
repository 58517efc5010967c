// The flywheel: good cloud answers from the request log become new training rows for the edge
// intent model (`hengshi flywheel export`), and a person checks a sample before they train it
// (`hengshi train` refuses an export whose review file is not fully marked).
//
// A row is taken when production answered it from the cloud with a model answer (status 200, not
// streamed, its text logged), neither the question nor the answer holds PII (the policy's
// detector, run again over both), and it is not a normalised duplicate of a row taken before.
// Its intent: the edge's own prediction when the cloud answer agreed with it (the shadow's
// verdict) — a paraphrase the edge knew but was not sure of. Rows without one are written apart
// (FILE.unlabelled.jsonl) for a person to name; they never reach training by themselves.
//
// The review sample (at least `review_share` of the rows, at least one; seeded) goes to
// FILE.review.jsonl with "verdict": null. The reviewer sets each to "ok" or "bad". `train` then
// drops the rows marked bad and prints the sample's error share; while any verdict is missing it
// refuses the export, unless --unreviewed.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "obs/request_log_reader.h"

namespace hengshi::edge {

struct FlywheelRow {
  std::string id;  // the request's
  std::string text;
  std::string intent;  // "" = unlabelled
  std::string answer;
};

struct FlywheelOptions {
  double review_share = 0.05;
  std::uint64_t seed = 1;
  std::function<bool(std::string_view)> has_pii;        // the policy's detector
  std::function<std::string(std::string_view)> normalise;  // for duplicates
};

struct FlywheelExport {
  std::vector<FlywheelRow> rows;        // labelled: the training rows
  std::vector<FlywheelRow> unlabelled;  // good answers the edge has no intent for
  std::vector<std::size_t> review;      // indices into rows: the sample for a person
  std::size_t considered = 0;           // cloud model answers with their text
  std::size_t dropped_pii = 0;
  std::size_t dropped_duplicates = 0;
};

FlywheelExport select_flywheel_rows(const std::vector<obs::LoggedRequest>& log, const FlywheelOptions& options);

// Writes FILE (the rows, {"text","intent","answer"}), FILE.review.jsonl and
// FILE.unlabelled.jsonl.
Status write_flywheel_export(const FlywheelExport& selected, const std::string& path);

inline std::string review_path_of(const std::string& data_path) { return data_path + ".review.jsonl"; }

struct ReviewState {
  bool is_export = false;         // a review file sits beside the data
  std::size_t sampled = 0;
  std::size_t reviewed = 0;       // rows with a verdict
  std::set<std::string> bad_texts;  // rows marked "bad": left out of training
};

// Reads DATA.review.jsonl when there is one. Error "review_invalid" for a malformed file.
Result<ReviewState> read_review_state(const std::string& data_path);

}  // namespace hengshi::edge
