#include "router/capability_matrix.h"

#include <gtest/gtest.h>

namespace hengshi::router {
namespace {

CapabilityMatrix default_matrix() {
  auto matrix = CapabilityMatrix::create(CapabilityMatrix::defaults());
  EXPECT_TRUE(matrix.ok());
  return matrix.value();
}

TEST(CapabilityMatrixTest, ParsesAllowance) {
  EXPECT_EQ(parse_allowance("yes"), EdgeAllowance::yes);
  EXPECT_EQ(parse_allowance("no"), EdgeAllowance::no);
  EXPECT_EQ(parse_allowance("partial"), EdgeAllowance::partial);
  EXPECT_EQ(parse_allowance("Yes"), std::nullopt);
  EXPECT_EQ(parse_allowance(""), std::nullopt);
  EXPECT_EQ(to_string(EdgeAllowance::partial), "partial");
}

TEST(CapabilityMatrixTest, DefaultRowIsAddedWhenAbsent) {
  auto matrix = CapabilityMatrix::create({{"faq", CapabilityRow{}}});
  ASSERT_TRUE(matrix.ok());
  ASSERT_TRUE(matrix->rows().contains("default"));
  EXPECT_EQ(matrix->row("").max_input_tokens, 512);
}

TEST(CapabilityMatrixTest, UnknownAndEmptyTaskTypesUseTheDefaultRow) {
  auto matrix =
      CapabilityMatrix::create({{"faq", CapabilityRow{EdgeAllowance::yes, 100, 50, ""}},
                                {"default", CapabilityRow{EdgeAllowance::partial, 300, 30, ""}}});
  ASSERT_TRUE(matrix.ok());
  bool unknown = true;
  EXPECT_EQ(matrix->row("faq", &unknown).max_input_tokens, 100);
  EXPECT_FALSE(unknown);
  EXPECT_EQ(matrix->row("", &unknown).max_input_tokens, 300);
  EXPECT_FALSE(unknown);  // empty is "not classified", not "unknown"
  EXPECT_EQ(matrix->row("poetry", &unknown).max_input_tokens, 300);
  EXPECT_TRUE(unknown);
  EXPECT_EQ(matrix->row("poetry").edge, EdgeAllowance::partial);  // null pointer is fine
}

TEST(CapabilityMatrixTest, ValidationNamesTheField) {
  auto bad_input =
      CapabilityMatrix::create({{"faq", CapabilityRow{EdgeAllowance::yes, 0, 10, ""}}});
  ASSERT_FALSE(bad_input.ok());
  EXPECT_EQ(bad_input.error().code, "config_invalid");
  EXPECT_NE(bad_input.error().message.find("capabilities.faq.max_input_tokens"), std::string::npos);

  auto bad_output =
      CapabilityMatrix::create({{"default", CapabilityRow{EdgeAllowance::yes, 10, -1, ""}}});
  ASSERT_FALSE(bad_output.ok());
  EXPECT_NE(bad_output.error().message.find("capabilities.default.max_output_tokens"),
            std::string::npos);

  auto bad_condition =
      CapabilityMatrix::create({{"x", CapabilityRow{EdgeAllowance::partial, 10, 10, "vibes"}}});
  ASSERT_FALSE(bad_condition.ok());
  EXPECT_NE(bad_condition.error().message.find("capabilities.x.condition"), std::string::npos);
  EXPECT_NE(bad_condition.error().message.find("vibes"), std::string::npos);

  auto empty_task = CapabilityMatrix::create({{"", CapabilityRow{}}});
  ASSERT_FALSE(empty_task.ok());
  EXPECT_EQ(empty_task.error().code, "config_invalid");
}

TEST(CapabilityMatrixTest, DefaultsAreValidAndAsDocumented) {
  const auto rows = CapabilityMatrix::defaults();
  EXPECT_EQ(rows.at("code").edge, EdgeAllowance::no);
  EXPECT_EQ(rows.at("reasoning").edge, EdgeAllowance::no);
  EXPECT_EQ(rows.at("summarize").edge, EdgeAllowance::partial);
  EXPECT_EQ(rows.at("summarize").max_input_tokens, 1024);
  EXPECT_EQ(rows.at("extraction").condition, kConditionStructuredOutputSchema);
  EXPECT_EQ(rows.at("faq").edge, EdgeAllowance::yes);
  EXPECT_TRUE(rows.contains("default"));
  EXPECT_TRUE(CapabilityMatrix::create(rows).ok());
}

TEST(CapabilityMatrixTest, EdgeNoIsNeverAllowed) {
  const auto matrix = default_matrix();
  const auto verdict = matrix.admit("code", CapabilityRequest{10, 10, false, false});
  EXPECT_FALSE(verdict.edge_allowed);
  EXPECT_EQ(verdict.reason, "edge_not_allowed");
}

TEST(CapabilityMatrixTest, ToolsNeverGoToTheEdge) {
  const auto matrix = default_matrix();
  const auto verdict = matrix.admit("faq", CapabilityRequest{10, 10, false, true});
  EXPECT_FALSE(verdict.edge_allowed);
  EXPECT_EQ(verdict.reason, "tools");
  // edge_not_allowed wins over tools: the first failing check is the reason.
  EXPECT_EQ(matrix.admit("code", CapabilityRequest{10, 10, false, true}).reason,
            "edge_not_allowed");
}

TEST(CapabilityMatrixTest, StructuredOutputRefusedOnlyUnderTheSchemaCondition) {
  const auto matrix = default_matrix();
  const CapabilityRequest structured{10, 10, true, false};
  const auto extraction = matrix.admit("extraction", structured);
  EXPECT_FALSE(extraction.edge_allowed);
  EXPECT_EQ(extraction.reason, "structured_output");
  EXPECT_TRUE(matrix.admit("extraction", CapabilityRequest{10, 10, false, false}).edge_allowed);
  EXPECT_TRUE(matrix.admit("faq", structured).edge_allowed);  // no condition on the row
}

TEST(CapabilityMatrixTest, InputCapApplies) {
  const auto matrix = default_matrix();
  EXPECT_TRUE(matrix.admit("faq", CapabilityRequest{512, 0, false, false}).edge_allowed);
  const auto long_faq = matrix.admit("faq", CapabilityRequest{513, 0, false, false});
  EXPECT_FALSE(long_faq.edge_allowed);
  EXPECT_EQ(long_faq.reason, "input_too_long");
  EXPECT_TRUE(matrix.admit("summarize", CapabilityRequest{1024, 0, false, false}).edge_allowed);
  EXPECT_EQ(matrix.admit("summarize", CapabilityRequest{1025, 0, false, false}).reason,
            "input_too_long");
}

TEST(CapabilityMatrixTest, OutputCapRefusesOnlyPartialRows) {
  const auto matrix = default_matrix();
  // yes rows: the edge caps its own output instead of refusing.
  EXPECT_TRUE(matrix.admit("faq", CapabilityRequest{10, 4096, false, false}).edge_allowed);
  const auto partial = matrix.admit("summarize", CapabilityRequest{10, 257, false, false});
  EXPECT_FALSE(partial.edge_allowed);
  EXPECT_EQ(partial.reason, "output_too_long");
  EXPECT_TRUE(matrix.admit("summarize", CapabilityRequest{10, 256, false, false}).edge_allowed);
}

TEST(CapabilityMatrixTest, UnknownTaskIsJudgedByTheDefaultRowAndReported) {
  const auto matrix = default_matrix();
  bool unknown = false;
  const auto verdict = matrix.admit("poetry", CapabilityRequest{600, 0, false, false}, &unknown);
  EXPECT_TRUE(unknown);
  EXPECT_FALSE(verdict.edge_allowed);
  EXPECT_EQ(verdict.reason, "input_too_long");
  EXPECT_TRUE(matrix.admit("faq", CapabilityRequest{}, &unknown).edge_allowed);
  EXPECT_FALSE(unknown);
  EXPECT_TRUE(matrix.admit("faq", CapabilityRequest{}).reason.empty());
}

}  // namespace
}  // namespace hengshi::router
