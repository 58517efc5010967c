#include "edge/flywheel.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "core/json_lines.h"
#include "core/json_text.h"

namespace hengshi::edge {
namespace {

using nlohmann::json;

Status write_lines(const std::string& path, const std::vector<json>& lines) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return Error{"export_unwritable", path + ": cannot write"};
    for (const auto& line : lines) out << dump_text(line) << '\n';
    if (!out.flush()) return Error{"export_unwritable", path + ": write failed"};
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);  // whole files or none: a reader never sees half
  if (ec) return Error{"export_unwritable", path + ": " + ec.message()};
  return Ok{};
}

json row_json(const FlywheelRow& row) {
  json out = {{"text", row.text}, {"answer", row.answer}};
  out["intent"] = row.intent.empty() ? json(nullptr) : json(row.intent);
  return out;
}

}  // namespace

FlywheelExport select_flywheel_rows(const std::vector<obs::LoggedRequest>& log, const FlywheelOptions& options) {
  FlywheelExport out;
  std::set<std::string> seen;
  for (const auto& row : log) {
    if (!row.cloud_served() || row.answer_kind != "model" || row.status != 200 || !row.prompt || !row.answer ||
        row.answer->empty() || row.pii) {
      continue;
    }
    ++out.considered;
    if (options.has_pii && (options.has_pii(*row.prompt) || options.has_pii(*row.answer))) {
      ++out.dropped_pii;
      continue;
    }
    const std::string key = options.normalise ? options.normalise(*row.prompt) : *row.prompt;
    if (!seen.insert(key).second) {
      ++out.dropped_duplicates;
      continue;
    }
    FlywheelRow taken{row.id, *row.prompt, {}, *row.answer};
    // The edge's intent, only when the cloud's answer agreed with the edge's (shadow verdict).
    if (row.shadow_agree == true && !row.intent.empty() && row.intent != "__oos__") taken.intent = row.intent;
    (taken.intent.empty() ? out.unlabelled : out.rows).push_back(std::move(taken));
  }
  if (!out.rows.empty()) {
    const auto wanted = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::ceil(options.review_share * static_cast<double>(out.rows.size()))));
    std::vector<std::size_t> order(out.rows.size());
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(options.seed);
    std::shuffle(order.begin(), order.end(), rng);
    order.resize(std::min(wanted, order.size()));
    std::sort(order.begin(), order.end());
    out.review = std::move(order);
  }
  return out;
}

Status write_flywheel_export(const FlywheelExport& selected, const std::string& path) {
  std::vector<json> rows, review, unlabelled;
  for (const auto& row : selected.rows) rows.push_back(row_json(row));
  for (std::size_t i : selected.review) {
    json line = row_json(selected.rows[i]);
    line["id"] = selected.rows[i].id;
    line["verdict"] = nullptr;  // the reviewer writes "ok" or "bad"
    review.push_back(std::move(line));
  }
  for (const auto& row : selected.unlabelled) {
    json line = row_json(row);
    line["id"] = row.id;
    unlabelled.push_back(std::move(line));
  }
  // The review file first: an export without one would look like ordinary data to `train`.
  if (auto written = write_lines(review_path_of(path), review); !written) return written;
  if (auto written = write_lines(path + ".unlabelled.jsonl", unlabelled); !written) return written;
  return write_lines(path, rows);
}

Result<ReviewState> read_review_state(const std::string& data_path) {
  ReviewState state;
  const std::string path = review_path_of(data_path);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return state;
  state.is_export = true;
  // An export without rows has an empty review file: nothing to review (the helper below calls a
  // file without rows an error).
  if (std::filesystem::file_size(path, ec) == 0 && !ec) return state;
  Status read = for_each_json_line(path, [&](const json& row, std::size_t) -> std::string {
    if (!row.contains("text") || !row["text"].is_string()) return "not a review row {\"text\", \"verdict\"}";
    ++state.sampled;
    const json verdict = row.value("verdict", json(nullptr));
    if (verdict.is_null()) return {};
    if (verdict != "ok" && verdict != "bad") return "verdict must be \"ok\", \"bad\" or null (not reviewed yet)";
    ++state.reviewed;
    if (verdict == "bad") state.bad_texts.insert(row["text"].get<std::string>());
    return {};
  });
  if (!read) return read.error();
  return state;
}

}  // namespace hengshi::edge
