#include "router/capability_matrix.h"

#include <utility>

namespace hengshi::router {
namespace {

constexpr std::string_view kDefaultTask = "default";

Error invalid(const std::string& task, std::string_view field, std::string_view why) {
  return Error{"config_invalid",
               "capabilities." + task + "." + std::string(field) + ": " + std::string(why)};
}

}  // namespace

std::optional<EdgeAllowance> parse_allowance(std::string_view text) {
  if (text == "yes") return EdgeAllowance::yes;
  if (text == "no") return EdgeAllowance::no;
  if (text == "partial") return EdgeAllowance::partial;
  return std::nullopt;
}

std::string_view to_string(EdgeAllowance allowance) {
  switch (allowance) {
    case EdgeAllowance::yes:
      return "yes";
    case EdgeAllowance::no:
      return "no";
    case EdgeAllowance::partial:
      return "partial";
  }
  return "no";
}

Result<CapabilityMatrix> CapabilityMatrix::create(std::map<std::string, CapabilityRow> rows) {
  rows.try_emplace(std::string(kDefaultTask));
  CapabilityMatrix matrix;
  for (auto& [task, row] : rows) {
    if (task.empty()) return Error{"config_invalid", "capabilities: empty task type"};
    if (row.max_input_tokens <= 0) {
      return invalid(task, "max_input_tokens",
                     "must be > 0 (got " + std::to_string(row.max_input_tokens) + ")");
    }
    if (row.max_output_tokens <= 0) {
      return invalid(task, "max_output_tokens",
                     "must be > 0 (got " + std::to_string(row.max_output_tokens) + ")");
    }
    if (!row.condition.empty() && row.condition != kConditionStructuredOutputSchema) {
      return invalid(task, "condition",
                     "unknown condition \"" + row.condition + "\" (known: \"\", \"" +
                         std::string(kConditionStructuredOutputSchema) + "\")");
    }
    matrix.rows_.emplace(task, std::move(row));
  }
  return matrix;
}

const CapabilityRow& CapabilityMatrix::row(std::string_view task_type, bool* unknown) const {
  if (unknown != nullptr) *unknown = false;
  if (!task_type.empty()) {
    if (const auto it = rows_.find(task_type); it != rows_.end()) return it->second;
    if (unknown != nullptr) *unknown = true;
  }
  return rows_.find(kDefaultTask)->second;  // create() guarantees it
}

CapabilityVerdict CapabilityMatrix::admit(std::string_view task_type,
                                          const CapabilityRequest& request, bool* unknown) const {
  const CapabilityRow& capability = row(task_type, unknown);
  const auto refuse = [](std::string reason) {
    return CapabilityVerdict{false, std::move(reason)};
  };
  if (capability.edge == EdgeAllowance::no) return refuse("edge_not_allowed");
  if (request.has_tools) return refuse("tools");
  if (request.wants_structured_output && capability.condition == kConditionStructuredOutputSchema) {
    return refuse("structured_output");
  }
  if (request.input_tokens > capability.max_input_tokens) return refuse("input_too_long");
  if (capability.edge == EdgeAllowance::partial &&
      request.requested_output_tokens > capability.max_output_tokens) {
    return refuse("output_too_long");
  }
  return CapabilityVerdict{};
}

std::map<std::string, CapabilityRow> CapabilityMatrix::defaults() {
  using enum EdgeAllowance;
  return {
      {"faq", CapabilityRow{yes, 512, 256, ""}},
      {"chitchat", CapabilityRow{yes, 512, 256, ""}},
      {"summarize", CapabilityRow{partial, 1024, 256, ""}},
      {"code", CapabilityRow{no, 512, 256, ""}},
      {"reasoning", CapabilityRow{no, 512, 256, ""}},
      {"extraction",
       CapabilityRow{partial, 512, 256, std::string(kConditionStructuredOutputSchema)}},
      {std::string(kDefaultTask), CapabilityRow{yes, 512, 256, ""}},
  };
}

}  // namespace hengshi::router
