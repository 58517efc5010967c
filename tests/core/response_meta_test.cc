#include "core/response_meta.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hengshi {
namespace {

// The text written without a DOM must be the object to_json() builds, field for field.
void expect_same(const ResponseMeta& meta) {
  const std::string text = meta.to_json_text(/*with_figures=*/false);
  const auto parsed = nlohmann::json::parse(text);
  EXPECT_EQ(parsed, meta.to_json(false)) << text;
  EXPECT_EQ(text, meta.to_json(false).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

TEST(ResponseMetaText, MatchesTheDomForEveryOptionalField) {
  ResponseMeta bare;
  bare.request_id = "hs-1";
  expect_same(bare);

  ResponseMeta full;
  full.request_id = "hs-2";
  full.decision.route = Route::edge;
  full.decision.reason = Reason::high_confidence;
  full.decision.confidence = 0.9731;
  full.decision.intent_confidence = 0.99;
  full.decision.in_scope = 0.983;
  full.decision.intent = "退款";
  full.decision.edge_engine = EdgeEngine::intent;
  full.decision.fallback_type = FallbackType::quality;
  full.level = 1;
  full.answered_by = "edge_intent";
  full.answer_kind = AnswerKind::model;
  full.committed_after_pieces = 3;
  full.cache = "semantic";
  full.cache_similarity = 0.8125;
  full.cache_entry = "00ff";
  full.attempts = 2;
  full.offline = true;
  full.overhead_us = 123;
  full.model = "m \"quoted\"";
  full.upstream = "sim-1";
  full.cost = 0.00042;
  full.key = "team-a";
  expect_same(full);
}

TEST(ResponseMetaText, InvalidUtf8IsReplacedAsTheDomDumpDoes) {
  ResponseMeta meta;
  meta.request_id = "hs-3";
  meta.decision.intent = "bad \xC3 byte";
  const std::string text = meta.to_json_text(false);
  EXPECT_EQ(text, meta.to_json(false).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  EXPECT_EQ(nlohmann::json::parse(text)["intent"], "bad \xEF\xBF\xBD byte");
}

TEST(ResponseMetaText, WithFiguresIsTheFullDom) {
  ResponseMeta meta;
  meta.request_id = "hs-4";
  meta.decision.figures = {{"threshold", 0.5}};
  EXPECT_EQ(nlohmann::json::parse(meta.to_json_text(true)), meta.to_json(true));
}

}  // namespace
}  // namespace hengshi
