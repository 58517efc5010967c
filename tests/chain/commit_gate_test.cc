#include "chain/commit_gate.h"

#include <gtest/gtest.h>

namespace hengshi::chain {
namespace {

TEST(CommitGate, CommitsAfterNPiecesOrTheFirstSentence) {
  CommitGate by_count(CommitConfig{3, false});
  EXPECT_FALSE(by_count.add_text("Hello"));
  EXPECT_FALSE(by_count.add_text(" there."));
  EXPECT_TRUE(by_count.add_text(" Next"));
  EXPECT_TRUE(by_count.reached());

  CommitGate by_sentence(CommitConfig{16, true});
  EXPECT_FALSE(by_sentence.add_text("Version 3.5"));
  EXPECT_FALSE(by_sentence.add_text(" is out."));
  EXPECT_TRUE(by_sentence.add_text(" More"));  // ". " now closes the first sentence

  CommitGate chinese(CommitConfig{16, true});
  EXPECT_FALSE(chinese.add_text("您好"));
  EXPECT_TRUE(chinese.add_text("，订单已发货。"));
}

TEST(CommitGate, EmptyPiecesDoNotCount) {
  CommitGate gate(CommitConfig{2, false});
  EXPECT_FALSE(gate.add_text(""));
  EXPECT_FALSE(gate.add_text("a"));
  EXPECT_TRUE(gate.add_text("b"));
}

TEST(ChunkContent, ReadsTheDeltaAndToleratesAnything) {
  EXPECT_EQ(chunk_content(R"({"choices":[{"delta":{"content":"hi"}}]})"), "hi");
  EXPECT_EQ(chunk_content(R"({"choices":[{"delta":{"role":"assistant"}}]})"), "");
  EXPECT_EQ(chunk_content("not json"), "");
  EXPECT_EQ(chunk_content(R"({"choices":"x"})"), "");
}

}  // namespace
}  // namespace hengshi::chain
