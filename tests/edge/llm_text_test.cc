#include "edge/llm_text.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/text_checks.h"

namespace hengshi::edge {
namespace {

// Feeds `pieces` through a filter; returns everything emitted, in order.
std::vector<std::string> run_filter(StopFilter& filter, const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  for (const auto& piece : pieces) {
    auto emitted = filter.append(piece);
    if (!emitted.empty()) out.push_back(emitted);
    if (filter.stopped()) break;
  }
  auto tail = filter.finish();
  if (!tail.empty()) out.push_back(tail);
  return out;
}

using testing::concat;  // support/text_checks.h

TEST(Utf8Tail, CountsOnlyAnUnfinishedCharacter) {
  EXPECT_EQ(incomplete_utf8_tail(""), 0u);
  EXPECT_EQ(incomplete_utf8_tail("abc"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("中"), 0u);         // E4 B8 AD complete
  EXPECT_EQ(incomplete_utf8_tail("a\xE4\xB8"), 2u);  // 2 of 3 bytes
  EXPECT_EQ(incomplete_utf8_tail("a\xE4"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98"), 3u);  // 3 of a 4-byte emoji
  EXPECT_EQ(incomplete_utf8_tail("\xF0\x9F\x98\x80"), 0u);
}

TEST(StopFilter, PassesTextThroughWithoutStops) {
  StopFilter filter({});
  auto out = run_filter(filter, {"Hel", "lo", " world"});
  EXPECT_EQ(concat(out), "Hello world");
  EXPECT_EQ(filter.emitted(), "Hello world");
  EXPECT_FALSE(filter.stopped());
}

TEST(StopFilter, CutsAtAStopSequenceInsideOnePiece) {
  StopFilter filter({"END"});
  auto out = run_filter(filter, {"abc", "dEND tail", "more"});
  EXPECT_EQ(concat(out), "abcd");
  EXPECT_TRUE(filter.stopped());
  EXPECT_EQ(filter.emitted(), "abcd");
}

TEST(StopFilter, HoldsBackAPartialMatchAcrossPieces) {
  StopFilter filter({"\nUser:"});
  EXPECT_EQ(filter.append("answer"), "answer");
  EXPECT_EQ(filter.append("\nUs"), "");  // could be the start of the stop sequence
  EXPECT_EQ(filter.append("e"), "");
  EXPECT_EQ(filter.append("r:"), "");
  EXPECT_TRUE(filter.stopped());
  EXPECT_EQ(filter.emitted(), "answer");
}

TEST(StopFilter, ReleasesAHeldPrefixThatDidNotBecomeAStop) {
  StopFilter filter({"###"});
  EXPECT_EQ(filter.append("a#"), "a");
  EXPECT_EQ(filter.append("#b"), "##b");
  EXPECT_EQ(filter.append("##"), "");
  EXPECT_EQ(filter.finish(), "##");  // generation ended: held text is part of the answer
  EXPECT_EQ(filter.emitted(), "a##b##");
}

TEST(StopFilter, EarliestOfSeveralStopsWins) {
  StopFilter filter({"zz", "b"});
  auto out = run_filter(filter, {"aazzab"});
  EXPECT_EQ(concat(out), "aa");
}

TEST(StopFilter, NeverSplitsAUtf8Character) {
  StopFilter filter({});
  EXPECT_EQ(filter.append("你\xE5"), "你");  // 好 = E5 A5 BD, split over pieces
  EXPECT_EQ(filter.append("\xA5"), "");
  EXPECT_EQ(filter.append("\xBD!"), "好!");
  EXPECT_EQ(filter.append("\xE5"), "");
  EXPECT_EQ(filter.finish(), "");  // an unfinished character at the end is dropped
  EXPECT_EQ(filter.emitted(), "你好!");
}

TEST(StopFilter, IgnoresEmptyStopStrings) {
  StopFilter filter({""});
  EXPECT_EQ(filter.append("abc"), "abc");
  EXPECT_FALSE(filter.stopped());
}

std::vector<ChatMessage> conversation_with_turns(int turns) {
  std::vector<ChatMessage> messages{{"system", "You are a support agent."}};
  for (int i = 1; i <= turns; ++i) {
    messages.push_back({"user", "question " + std::to_string(i) + " " + std::string(300, 'q')});
    messages.push_back({"assistant", "answer " + std::to_string(i) + " " + std::string(300, 'a')});
  }
  messages.push_back({"user", "final question " + std::string(500, 'f')});
  return messages;
}

TEST(EdgeMessages, KeepsSystemAndAtMostTheLastThreeTurns) {
  auto conversation = conversation_with_turns(6);
  auto edge = build_edge_messages(conversation, {3, 40});

  ASSERT_EQ(edge.size(), 6u);  // system + (user, assistant) x 2 + final user
  EXPECT_EQ(edge[0].role, "system");
  EXPECT_EQ(edge[0].text, "You are a support agent.");
  EXPECT_EQ(edge[1].role, "user");
  EXPECT_EQ(edge[1].text.rfind("question 5 ", 0), 0u);
  EXPECT_EQ(edge[4].role, "assistant");
  EXPECT_EQ(edge[4].text.rfind("answer 6 ", 0), 0u);
  // The last user message goes verbatim; earlier ones are cut with an ellipsis.
  EXPECT_EQ(edge.back().text, conversation.back().text);
  for (std::size_t i = 1; i + 1 < edge.size(); ++i) {
    EXPECT_EQ(edge[i].text.size(), 40u + std::string("…").size()) << i;
  }
  // The caller's full history is untouched (it stays for the cloud).
  EXPECT_EQ(conversation.size(), 14u);
}

TEST(EdgeMessages, ShortConversationIsKeptWhole) {
  std::vector<ChatMessage> conversation{{"user", "hi"}, {"assistant", "hello"}, {"user", "help"}};
  auto edge = build_edge_messages(conversation, {3, 200});
  ASSERT_EQ(edge.size(), 3u);
  EXPECT_EQ(edge[0].text, "hi");
  EXPECT_EQ(edge[2].text, "help");
}

TEST(EdgeMessages, MergesSystemMessagesAndDropsToolMessages) {
  std::vector<ChatMessage> conversation{{"system", "rule one"},
                                        {"developer", "rule two"},
                                        {"user", "look it up"},
                                        {"tool", "{\"result\": 1}"},
                                        {"user", "thanks"}};
  auto edge = build_edge_messages(conversation, {1, 200});
  ASSERT_EQ(edge.size(), 2u);
  EXPECT_EQ(edge[0].role, "system");
  EXPECT_EQ(edge[0].text, "rule one\nrule two");
  EXPECT_EQ(edge[1].text, "thanks");
}

TEST(EdgeMessages, TruncatesByCharactersNotBytes) {
  std::vector<ChatMessage> conversation{
      {"user", "我想查询一下我的订单状态"}, {"assistant", "好的"}, {"user", "谢谢"}};
  auto edge = build_edge_messages(conversation, {3, 4});
  ASSERT_EQ(edge.size(), 3u);
  EXPECT_EQ(edge[0].text, "我想查询…");
  EXPECT_EQ(edge[1].text, "好的");
}

}  // namespace
}  // namespace hengshi::edge
