#include "obs/request_log_reader.h"

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "core/decision.h"
#include "obs/request_log.h"

namespace hengshi::obs {
namespace {

using nlohmann::json;

std::string string_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

double number_of(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_number() ? it->get<double>() : 0.0;
}

}  // namespace

bool LoggedRequest::edge_served() const {
  const auto source = source_from_string(answered_by);
  return source && is_edge(*source);
}

bool LoggedRequest::cloud_served() const {
  const auto source = source_from_string(answered_by);
  return source && is_cloud(*source);
}

namespace {

// The shadow join, kept across the files of one log.
struct ShadowJoin {
  std::map<std::string, std::size_t> by_id;  // request id → index in `out`, for the shadows
  std::map<std::string, bool> early_shadows;  // a shadow line may come before its request's
};

void read_lines(std::istream& in, std::vector<LoggedRequest>& out, LogReadStats& stats, ShadowJoin& join) {
  auto& by_id = join.by_id;
  auto& early_shadows = join.early_shadows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    ++stats.lines;
    const json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded() || !record.is_object()) {
      ++stats.malformed;
      continue;
    }
    auto schema = record.find("schema");
    if (schema == record.end() || !schema->is_number_integer() || schema->get<int>() != kRequestLogSchemaVersion) {
      ++stats.other_schema;
      continue;
    }
    if (record.value("shadow", false)) {
      ++stats.shadows;
      auto verdict = record.find("verdict");
      if (verdict == record.end() || !verdict->is_string()) continue;
      const bool agree = verdict->get<std::string>() == "agree";
      const std::string id = string_of(record, "id");
      if (auto it = by_id.find(id); it != by_id.end()) {
        out[it->second].shadow_agree = agree;
      } else {
        early_shadows[id] = agree;
      }
      continue;
    }
    ++stats.requests;
    LoggedRequest row;
    row.id = string_of(record, "id");
    row.task_type = string_of(record, "task_type");
    row.session = string_of(record, "session");
    row.route = string_of(record, "route");
    row.reason = string_of(record, "reason");
    row.answered_by = string_of(record, "answered_by");
    row.answer_kind = string_of(record, "answer_kind");
    row.intent = string_of(record, "intent");
    if (auto c = record.find("confidence"); c != record.end() && c->is_number()) row.confidence = c->get<double>();
    row.status = static_cast<int>(number_of(record, "status"));
    row.cost = number_of(record, "cost");
    row.cost_all_cloud_large = number_of(record, "cost_all_cloud_large");
    if (auto figures = record.find("figures"); figures != record.end() && figures->is_object()) {
      row.pii = figures->contains("pii");
    }
    if (auto text = record.find("text"); text != record.end() && text->is_object()) {
      if (auto p = text->find("prompt"); p != text->end() && p->is_string()) row.prompt = p->get<std::string>();
      if (auto a = text->find("answer"); a != text->end() && a->is_string()) row.answer = a->get<std::string>();
    }
    if (auto early = early_shadows.find(row.id); early != early_shadows.end()) row.shadow_agree = early->second;
    by_id[row.id] = out.size();
    out.push_back(std::move(row));
  }
}

}  // namespace

void read_request_log(std::istream& in, std::vector<LoggedRequest>& out, LogReadStats& stats) {
  ShadowJoin join;
  read_lines(in, out, stats, join);
}

Status read_request_log_files(const std::vector<std::string>& paths, std::vector<LoggedRequest>& out,
                              LogReadStats& stats) {
  ShadowJoin join;
  for (const auto& path : paths) {
    std::ifstream in(path);
    if (!in) return Error{"log_unreadable", path + ": cannot open the request log"};
    read_lines(in, out, stats, join);
  }
  return Ok{};
}

}  // namespace hengshi::obs
