#include "cloud/sse_parser.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hengshi::cloud {
namespace {

std::vector<std::string> drain(SseParser& parser) {
  std::vector<std::string> events;
  while (auto event = parser.next_event()) events.emplace_back(*event);
  return events;
}

TEST(SseParser, YieldsDataOfEachEvent) {
  SseParser parser;
  parser.append("data: {\"a\":1}\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(drain(parser), (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"}));
}

TEST(SseParser, IncompleteEventWaitsForItsBlankLine) {
  SseParser parser;
  parser.append("data: {\"a\":1}\n");
  EXPECT_TRUE(drain(parser).empty());
  parser.append("\n");
  EXPECT_EQ(drain(parser), (std::vector<std::string>{"{\"a\":1}"}));
}

TEST(SseParser, AnySplitOfTheBytesGivesTheSameEvents) {
  const std::string body =
      ": keep-alive\r\n\r\nevent: message\r\ndata: {\"x\":\"y\"}\r\n\r\ndata:first\ndata: "
      "second\n\n"
      "id: 7\nretry: 10\n\ndata: {\"z\":0}\r\rdata: [DONE]\n\n";
  const std::vector<std::string> expected = {"{\"x\":\"y\"}", "first\nsecond", "{\"z\":0}",
                                             "[DONE]"};
  for (std::size_t split = 0; split <= body.size(); ++split) {
    SseParser parser;
    parser.append(body.substr(0, split));
    auto events = drain(parser);
    parser.append(body.substr(split));
    for (auto& event : drain(parser)) events.push_back(event);
    EXPECT_EQ(events, expected) << "split at " << split;
  }
}

TEST(SseParser, ByteByByte) {
  const std::string body = "data: {\"a\":1}\r\n\r\ndata: {\"b\":2}\n\n";
  SseParser parser;
  std::vector<std::string> events;
  for (char c : body) {
    parser.append(std::string(1, c));
    for (auto& event : drain(parser)) events.push_back(event);
  }
  EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}"}));
  EXPECT_EQ(parser.pending_bytes(), 0u);
}

TEST(SseParser, EventsWithoutDataAndCommentsAreSkipped) {
  SseParser parser;
  parser.append(": ping\n\nevent: x\n\nid: 1\n\n");
  EXPECT_TRUE(drain(parser).empty());
}

TEST(SseParser, ResetForgetsAPartialEvent) {
  SseParser parser;
  parser.append("data: partial");
  parser.reset();
  parser.append("data: whole\n\n");
  EXPECT_EQ(drain(parser), (std::vector<std::string>{"whole"}));
}

}  // namespace
}  // namespace hengshi::cloud

namespace hengshi::cloud {
namespace {

TEST(SseParserBounds, AnOverLongLineFailsInsteadOfGrowing) {
  SseParser parser(64);
  parser.append("data: {\"a\":1}\n\n");
  EXPECT_EQ(drain(parser), (std::vector<std::string>{"{\"a\":1}"}));
  // A line that never ends: the buffer stays bounded and the parser reports why.
  std::string endless(40, 'x');
  parser.append("data: ");
  for (int i = 0; i < 100 && !parser.failed(); ++i) {
    parser.append(endless);
    EXPECT_FALSE(parser.next_event().has_value());
  }
  ASSERT_TRUE(parser.failed());
  EXPECT_NE(parser.error().find("64 bytes"), std::string::npos) << parser.error();
  EXPECT_EQ(parser.buffered_bytes(), 0u);
  parser.append("\n\ndata: late\n\n");  // ignored once failed
  EXPECT_FALSE(parser.next_event().has_value());
  EXPECT_EQ(parser.buffered_bytes(), 0u);
}

TEST(SseParserBounds, AnEventOfManyShortDataLinesIsBoundedToo) {
  SseParser parser(64);
  for (int i = 0; i < 20 && !parser.failed(); ++i) {
    parser.append("data: 0123456789\n");
    EXPECT_FALSE(parser.next_event().has_value());
  }
  ASSERT_TRUE(parser.failed());
  EXPECT_NE(parser.error().find("data"), std::string::npos) << parser.error();
}

TEST(SseParserBounds, ACompleteOverLongLineInOneAppendFails) {
  SseParser parser(64);
  parser.append("data: " + std::string(100, 'y') + "\n\n");
  EXPECT_FALSE(parser.next_event().has_value());
  EXPECT_TRUE(parser.failed());
}

TEST(SseParserBounds, AnEventExactlyAtTheLimitPassesAndResetClearsTheFailure) {
  SseParser parser(64);
  std::string payload(64, 'z');
  parser.append("data:" + payload + "\n\n");  // the line is 69 bytes: over the limit
  EXPECT_FALSE(parser.next_event().has_value());
  EXPECT_TRUE(parser.failed());
  parser.reset();
  EXPECT_FALSE(parser.failed());
  SseParser wide(70);
  wide.append("data:" + payload + "\n\n");
  auto event = wide.next_event();
  ASSERT_TRUE(event.has_value());
  EXPECT_EQ(*event, payload);
}

}  // namespace
}  // namespace hengshi::cloud
