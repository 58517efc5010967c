#include "core/decision.h"

#include <gtest/gtest.h>

namespace hengshi {
namespace {

TEST(DecisionTest, EverySourceNameReadsBackAsItsSource) {
  for (Source source : {Source::edge_intent, Source::edge_intent_verified, Source::edge_llm, Source::cloud_small,
                        Source::cloud_large, Source::human_handoff, Source::safe_reply, Source::last_resort_reply,
                        Source::cache}) {
    EXPECT_EQ(source_from_string(to_string(source)), source) << to_string(source);
  }
  EXPECT_FALSE(source_from_string("").has_value());
  EXPECT_FALSE(source_from_string("cloud_small").has_value()) << "the wire name is cloud-small";
}

}  // namespace
}  // namespace hengshi
