#include "obs/replay.h"

#include <algorithm>
#include <cstdio>

#include "core/progress.h"

namespace hengshi::obs {
namespace {

using nlohmann::json;

constexpr double kBinEdges[] = {0.0, 0.5, 0.7, 0.8, 0.9, 0.95, 1.0000001};

struct Judged {
  std::string task_type;
  std::string intent;  // the candidate's
  double confidence = 0.0;
  bool passed = false;  // the candidate's edge answer would have been right
  bool to_edge = false;  // the candidate's thresholds would serve it at the edge
  bool answers = false;  // the candidate has an edge answer at all (in scope, with an answer)
};

std::string route_label(const LoggedRequest& row) {
  if (row.answered_by.empty()) return "none";
  if (row.edge_served()) return "edge";
  if (row.cloud_served() || row.answered_by == "cache") return row.answered_by;
  return "gateway";
}

GroupReport summarise(std::vector<const Judged*> rows, double target) {
  GroupReport out;
  out.rows = rows.size();
  for (std::size_t i = 0; i + 1 < std::size(kBinEdges); ++i) out.bins.push_back({kBinEdges[i], kBinEdges[i + 1], 0, 0});
  for (const Judged* row : rows) {
    // Only rows with an edge answer have a confidence worth binning; the others (out of scope,
    // no canned answer) always go to the cloud and count only as fallback samples.
    for (auto& bin : out.bins) {
      if (!row->answers) break;
      if (row->confidence >= bin.low && row->confidence < bin.high) {
        ++bin.rows;
        if (row->passed) ++bin.passed;
        break;
      }
    }
    if (row->to_edge) {
      ++out.missed_fallback.samples;
      if (!row->passed) ++out.missed_fallback.hits;
    } else {
      ++out.false_fallback.samples;
      if (row->passed) ++out.false_fallback.hits;
    }
  }
  // The lowest confidence at which the rows at or above it pass at the target rate.
  std::erase_if(rows, [](const Judged* row) { return !row->answers; });
  out.answering = rows.size();
  std::sort(rows.begin(), rows.end(), [](const Judged* a, const Judged* b) { return a->confidence > b->confidence; });
  std::size_t passed = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    passed += rows[i]->passed ? 1 : 0;
    const bool group_end = i + 1 == rows.size() || rows[i + 1]->confidence < rows[i]->confidence;
    if (!group_end) continue;
    const double precision = static_cast<double>(passed) / static_cast<double>(i + 1);
    if (precision >= target) {
      out.chosen_threshold = rows[i]->confidence;
      out.chosen_share = static_cast<double>(i + 1) / static_cast<double>(out.rows);
      out.chosen_precision = precision;
    }
  }
  return out;
}

json rate_json(const RateWithSamples& r) {
  return {{"rate", r.rate() ? json(*r.rate()) : json(nullptr)}, {"samples", r.samples}};
}

json group_json(const GroupReport& g) {
  json bins = json::array();
  for (const auto& bin : g.bins) {
    bins.push_back({{"low", bin.low},
                    {"high", std::min(bin.high, 1.0)},
                    {"rows", bin.rows},
                    {"pass_rate", bin.rows ? json(static_cast<double>(bin.passed) / bin.rows) : json(nullptr)}});
  }
  return {{"rows", g.rows},
          {"answering", g.answering},
          {"bins", bins},
          {"false_fallback", rate_json(g.false_fallback)},
          {"missed_fallback", rate_json(g.missed_fallback)},
          {"chosen_threshold", g.chosen_threshold ? json(*g.chosen_threshold) : json(nullptr)},
          {"chosen_share", g.chosen_share},
          {"chosen_precision", g.chosen_precision}};
}

std::string percent(std::optional<double> value) {
  if (!value) return "     -";
  char text[16];
  std::snprintf(text, sizeof text, "%5.1f%%", *value * 100.0);
  return text;
}

}  // namespace

ReplayReport replay(const std::vector<LoggedRequest>& rows, const ReplayInputs& inputs) {
  ReplayReport report;
  report.requests = rows.size();
  double cloud_cost = 0.0;
  std::size_t cloud_rows = 0;
  for (const auto& row : rows) {
    report.cost_all_cloud_large += row.cost_all_cloud_large;
    if (row.cloud_served()) {
      cloud_cost += row.cost;
      ++cloud_rows;
    }
  }
  report.cloud_cost_estimate = cloud_rows ? cloud_cost / static_cast<double>(cloud_rows) : 0.0;

  std::vector<Judged> judged;
  judged.reserve(rows.size());
  Progress progress("replay: requests", rows.size());
  for (const auto& row : rows) {
    progress.advance();
    const std::string production = route_label(row);
    ++report.production.requests[production];
    report.production.cost += row.cost;
    // What the candidate cannot change: no text to replay, a cache hit, PII, the gateway's own.
    const bool replayable = row.prompt && !row.pii && (production == "edge" || row.cloud_served());
    if (!replayable) {
      ++report.candidate.requests[production];
      report.candidate.cost += row.cost;
      continue;
    }
    ++report.with_text;
    const CandidateAnswer candidate = inputs.predict(*row.prompt);
    const bool answers = !candidate.out_of_scope && !candidate.answer.empty();
    Judged j;
    j.task_type = row.task_type.empty() ? "none" : row.task_type;
    j.intent = candidate.out_of_scope ? "__oos__" : candidate.intent;
    j.confidence = candidate.confidence;
    j.answers = answers;
    j.to_edge = answers && candidate.confidence >= inputs.edge_threshold(row.task_type, candidate.intent);
    if (j.to_edge) {
      ++report.candidate.requests["edge"];
    } else {
      ++report.candidate.requests[row.cloud_served() ? row.answered_by : "cloud-small"];
      report.candidate.cost += row.cloud_served() ? row.cost : report.cloud_cost_estimate;
    }

    std::optional<bool> passed;
    std::optional<std::string> label;
    if (auto by_id = inputs.labels_by_id.find(row.id); by_id != inputs.labels_by_id.end()) {
      label = by_id->second;
    } else if (auto by_text = inputs.labels_by_text.find(*row.prompt); by_text != inputs.labels_by_text.end()) {
      label = by_text->second;
    }
    if (label) {
      passed = answers && candidate.intent == *label;
      ++report.reference_kinds["label"];
    } else if (inputs.compare_answers && row.cloud_served() && row.answer) {
      passed = answers && inputs.agree(candidate.answer, *row.answer);
      ++report.reference_kinds["cloud_answer"];
    } else if (row.edge_served() && row.shadow_agree && row.intent == candidate.intent) {
      passed = answers && *row.shadow_agree;
      ++report.reference_kinds["shadow"];
    }
    if (!passed) continue;
    j.passed = *passed;
    ++report.referenced;
    judged.push_back(std::move(j));
  }

  std::vector<const Judged*> all;
  std::map<std::string, std::vector<const Judged*>> by_task, by_intent;
  for (const auto& j : judged) {
    all.push_back(&j);
    by_task[j.task_type].push_back(&j);
    by_intent[j.intent].push_back(&j);
  }
  report.overall = summarise(all, inputs.target_precision);
  for (auto& [task, group] : by_task) report.task_types[task] = summarise(group, inputs.target_precision);
  for (auto& [intent, group] : by_intent) {
    if (group.size() >= inputs.min_intent_rows) report.intents[intent] = summarise(group, inputs.target_precision);
  }
  return report;
}

json to_json(const ReplayReport& report) {
  auto mix = [&](const RouteMix& m) {
    json requests = json::object();
    for (const auto& [route, n] : m.requests) requests[route] = n;
    return json{{"requests", requests}, {"cost", m.cost}};
  };
  json tasks = json::object();
  for (const auto& [task, g] : report.task_types) tasks[task] = group_json(g);
  json intents = json::object();
  for (const auto& [intent, g] : report.intents) intents[intent] = group_json(g);
  json kinds = json::object();
  for (const auto& [kind, n] : report.reference_kinds) kinds[kind] = n;
  return {{"requests", report.requests},
          {"with_text", report.with_text},
          {"referenced", report.referenced},
          {"reference_kinds", kinds},
          {"overall", group_json(report.overall)},
          {"task_types", tasks},
          {"intents", intents},
          {"production", mix(report.production)},
          {"candidate", mix(report.candidate)},
          {"cost_all_cloud_large", report.cost_all_cloud_large},
          {"cloud_cost_estimate", report.cloud_cost_estimate}};
}

std::string format_report(const ReplayReport& report, double target_precision) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "replay: %zu logged requests, %zu replayable with text, %zu with a reference\n",
                report.requests, report.with_text, report.referenced);
  out += line;
  auto group_lines = [&](const std::string& name, const GroupReport& g) {
    std::snprintf(line, sizeof line, "\n%s (%zu rows)\n  confidence    rows  pass rate\n", name.c_str(), g.rows);
    out += line;
    for (const auto& bin : g.bins) {
      const auto rate = bin.rows ? std::optional<double>(static_cast<double>(bin.passed) / bin.rows) : std::nullopt;
      std::snprintf(line, sizeof line, "  [%.2f, %.2f) %5zu  %s\n", bin.low, std::min(bin.high, 1.0), bin.rows,
                    percent(rate).c_str());
      out += line;
    }
    std::snprintf(line, sizeof line, "  false fallback %s of %zu sent to the cloud; missed fallback %s of %zu at the edge\n",
                  percent(g.false_fallback.rate()).c_str(), g.false_fallback.samples,
                  percent(g.missed_fallback.rate()).c_str(), g.missed_fallback.samples);
    out += line;
    if (g.chosen_threshold) {
      std::snprintf(line, sizeof line, "  target %.3f: threshold %.4f serves %s at the edge with precision %s\n",
                    target_precision, *g.chosen_threshold, percent(g.chosen_share).c_str(),
                    percent(g.chosen_precision).c_str());
    } else {
      std::snprintf(line, sizeof line, "  target %.3f: no threshold reaches it on these rows\n", target_precision);
    }
    out += line;
  };
  group_lines("all task types", report.overall);
  for (const auto& [task, g] : report.task_types) group_lines("task type " + task, g);
  for (const auto& [intent, g] : report.intents) group_lines("intent " + intent, g);
  out += "\nroute mix        production   candidate\n";
  std::map<std::string, bool> routes;
  for (const auto& [r, n] : report.production.requests) routes[r] = true;
  for (const auto& [r, n] : report.candidate.requests) routes[r] = true;
  auto share = [&](const RouteMix& m, const std::string& r) {
    auto it = m.requests.find(r);
    const std::size_t n = it == m.requests.end() ? 0 : it->second;
    return report.requests ? std::optional<double>(static_cast<double>(n) / report.requests) : std::nullopt;
  };
  for (const auto& [r, unused] : routes) {
    std::snprintf(line, sizeof line, "  %-14s %s      %s\n", r.c_str(), percent(share(report.production, r)).c_str(),
                  percent(share(report.candidate, r)).c_str());
    out += line;
  }
  std::snprintf(line, sizeof line, "cost             %10.4f  %10.4f   (all cloud-large: %.4f)\n", report.production.cost,
                report.candidate.cost, report.cost_all_cloud_large);
  out += line;
  return out;
}

}  // namespace hengshi::obs
