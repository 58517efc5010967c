// CapabilityMatrix: per task type, what the edge model may answer at all (DESIGN: capability
// gate). It is the first, cheapest routing check: a request the edge cannot serve never reaches
// the confidence or latency gates.
//
// An immutable value, built and validated once from config; safe to share across threads.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"

namespace hengshi::router {

// yes: the edge may answer (its output is capped at max_output_tokens);
// no: never the edge;
// partial: the edge only within the row's caps and condition.
enum class EdgeAllowance { yes, no, partial };

// Parses "yes" | "no" | "partial" (exact, lower case); nullopt otherwise.
std::optional<EdgeAllowance> parse_allowance(std::string_view text);
std::string_view to_string(EdgeAllowance allowance);

// The only condition known today: the edge's output would have to pass a schema check, which the
// edge cannot guarantee, so a request asking for structured output (response_format json_schema)
// is not sent to the edge.
inline constexpr std::string_view kConditionStructuredOutputSchema = "structured_output_schema";

struct CapabilityRow {
  EdgeAllowance edge = EdgeAllowance::yes;
  int max_input_tokens = 512;   // prompt tokens, as counted by the edge tokenizer
  int max_output_tokens = 256;  // completion tokens
  std::string condition;        // "" or kConditionStructuredOutputSchema
};

struct CapabilityRequest {
  int input_tokens = 0;
  int requested_output_tokens = 0;       // max_tokens / max_completion_tokens; 0 when not given
  bool wants_structured_output = false;  // response_format json_schema (or json_object)
  bool has_tools = false;
};

struct CapabilityVerdict {
  bool edge_allowed = true;
  // Empty when allowed; otherwise one of: edge_not_allowed, tools, structured_output,
  // input_too_long, output_too_long.
  std::string reason;
};

class CapabilityMatrix {
 public:
  // rows: task_type → row. A "default" row is added with CapabilityRow{} when absent.
  // Fails with Error{"config_invalid", "capabilities.<task>.<field>: ..."} when a cap is not > 0,
  // the condition is unknown, or a task type is empty.
  static Result<CapabilityMatrix> create(std::map<std::string, CapabilityRow> rows);

  // The row for `task_type`; unknown or empty task types get the "default" row. When `unknown`
  // is given it is set to true exactly when task_type is non-empty and has no row of its own.
  // The reference lives as long as the matrix.
  const CapabilityRow& row(std::string_view task_type, bool* unknown = nullptr) const;

  // Checks, in order (the first failing one is the reason):
  //   1. allowance no                                 → edge_not_allowed
  //   2. the request has tools                        → tools (the edge never runs tool calls,
  //                                                     whatever the row says)
  //   3. structured output and condition
  //      structured_output_schema                     → structured_output
  //   4. input_tokens > max_input_tokens              → input_too_long
  //   5. requested_output_tokens > max_output_tokens,
  //      partial rows only                            → output_too_long
  // A `yes` row does not refuse a long max_tokens: the edge caps its own output at
  // max_output_tokens instead. Structured output on a row without the condition is allowed.
  CapabilityVerdict admit(std::string_view task_type, const CapabilityRequest& request,
                          bool* unknown = nullptr) const;

  // The shipped defaults: faq, chitchat (yes 512/256), summarize (partial, 1024 in / 256 out),
  // code, reasoning (no), extraction (partial 512/256, structured_output_schema),
  // default (yes 512/256).
  static std::map<std::string, CapabilityRow> defaults();

  const std::map<std::string, CapabilityRow, std::less<>>& rows() const { return rows_; }

 private:
  CapabilityMatrix() = default;

  std::map<std::string, CapabilityRow, std::less<>> rows_;  // always holds "default"
};

}  // namespace hengshi::router
