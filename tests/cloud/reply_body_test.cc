#include "cloud/reply_body.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace hengshi::cloud {
namespace {

using nlohmann::json;

ReplyBody read_ok(std::string raw) {
  auto body = read_reply_body(std::move(raw));
  EXPECT_TRUE(body.ok()) << body.error().message;
  return body.ok() ? std::move(body).value() : ReplyBody{};
}

std::string error_of(std::string raw) {
  auto body = read_reply_body(std::move(raw));
  return body.ok() ? std::string("accepted") : body.error().message;
}

// The hot path reads into the reply it will send: a refused body leaves both the text and the
// reply as they were (the text is quoted in the error; nothing half-read reaches the client).
TEST(ReplyBodyTest, ReadingInPlaceTakesTheTextOnlyOnSuccess) {
  ReplyBody body;
  std::string raw = R"({"id":"x","usage":{"prompt_tokens":12}})";  // no choices
  auto refused = read_reply_body(std::move(raw), body);
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->message, "no \"choices\" array");
  EXPECT_EQ(raw, R"({"id":"x","usage":{"prompt_tokens":12}})");
  EXPECT_FALSE(body.present());
  EXPECT_EQ(body.usage.prompt_tokens, 0);

  raw = R"({"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2}})";
  EXPECT_FALSE(read_reply_body(std::move(raw), body).has_value());
  EXPECT_EQ(body.content, "hi");
  EXPECT_EQ(body.finish_reason, "stop");
  EXPECT_EQ(body.usage.prompt_tokens, 2);
  EXPECT_NE(body.raw.find("\"hi\""), std::string::npos);
}

// simdjson reads past the end of its input: a body read to its Content-Length has no room for
// that, and is parsed from a padded copy rather than grown (an allocation and a copy per reply).
// The bytes the reply keeps are the caller's own buffer, with or without the room.
TEST(ReplyBodyTest, ABodyIsReadWithoutGrowingItWhetherOrNotItHasPadding) {
  const std::string text =
      R"({"choices":[{"message":{"content":"a longer answer than a short string holds"},)"
      R"("finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":5}})";
  for (const bool padded : {false, true}) {
    std::string raw;
    raw.reserve(padded ? text.size() + kJsonPadding : text.size());
    raw = text;
    const char* const bytes = raw.data();
    ReplyBody body;
    ASSERT_FALSE(read_reply_body(std::move(raw), body).has_value()) << padded;
    EXPECT_EQ(body.raw.data(), bytes) << padded;  // moved in, never reallocated
    EXPECT_EQ(body.raw, text);
    EXPECT_EQ(body.content, "a longer answer than a short string holds");
    EXPECT_EQ(body.finish_reason, "stop");
    EXPECT_EQ(body.usage.completion_tokens, 5);
  }
}

TEST(ReplyBodyTest, ReadsTextFinishAndUsageOfTheFirstChoice) {
  auto body = read_ok(R"({"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"你好 \"there\""},)"
                      R"("finish_reason":"length"}],"usage":{"prompt_tokens":12,"completion_tokens":3}})");
  EXPECT_EQ(body.content, "你好 \"there\"");  // unescaped
  EXPECT_EQ(body.finish_reason, "length");
  EXPECT_EQ(body.usage.prompt_tokens, 12);
  EXPECT_EQ(body.usage.completion_tokens, 3);
  EXPECT_TRUE(body.plain_text);
  EXPECT_FALSE(body.has_hengshi);
}

TEST(ReplyBodyTest, ToolCallsSeveralChoicesAndNullContentAreNotPlainText) {
  EXPECT_FALSE(read_ok(R"({"choices":[{"message":{"content":"a","tool_calls":[]}}]})").plain_text);
  EXPECT_FALSE(read_ok(R"({"choices":[{"message":{"content":"a","function_call":{}}}]})").plain_text);
  auto two = read_ok(R"({"choices":[{"message":{"content":"a"}},{"message":{"content":"b"}}]})");
  EXPECT_FALSE(two.plain_text);
  EXPECT_EQ(two.content, "a");
  auto null_content = read_ok(R"({"choices":[{"message":{"content":null,"tool_calls":[{"id":"c"}]}}]})");
  EXPECT_EQ(null_content.content, "");
  EXPECT_FALSE(null_content.plain_text);
  auto no_usage = read_ok(R"({"choices":[],"usage":null})");
  EXPECT_EQ(no_usage.usage.prompt_tokens, 0);
}

TEST(ReplyBodyTest, RefusesWhatIsNotAChatCompletion) {
  EXPECT_NE(error_of("not json"), "accepted");
  EXPECT_NE(error_of("[1,2]"), "accepted");
  EXPECT_NE(error_of(R"({"choices":{}})"), "accepted");
  EXPECT_NE(error_of(R"({"object":"chat.completion"})"), "accepted");
  EXPECT_NE(error_of(R"({"choices":[]} trailing)"), "accepted");
  EXPECT_NE(error_of(std::string("{\"choices\":[],\"x\":\"\xff\"}")), "accepted");  // invalid UTF-8
  std::string deep = R"({"choices":[],"x":)" + std::string(200, '[') + std::string(200, ']') + "}";
  EXPECT_NE(error_of(deep), "accepted");
}

// The parse itself holds the depth limit (no scan before it): what a request may hold (64 levels
// of objects or arrays, the reply's own object included) is read; deeper is refused by name.
TEST(ReplyBodyTest, NestingIsLimitedByTheParseAtTheRequestsDepth) {
  std::string arrays = R"({"choices":[],"x":)" + std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_EQ(error_of(arrays), "accepted");
  std::string objects = R"({"choices":[],"x":)";
  for (int i = 0; i < 63; ++i) objects += R"({"y":)";
  objects += "1" + std::string(63, '}') + "}";
  EXPECT_EQ(error_of(objects), "accepted");
  std::string too_deep = R"({"choices":[],"x":)" + std::string(100, '[') + std::string(100, ']') + "}";
  EXPECT_EQ(error_of(too_deep).rfind("nested deeper than", 0), 0u) << error_of(too_deep);
  // A reply refused for depth leaves the parser usable for the next one.
  EXPECT_EQ(error_of(R"({"choices":[]})"), "accepted");
}

TEST(ReplyBodyTest, ARepeatedNameIsReadAsAClientReadsIt) {
  // JSON.parse and Python keep the last of a repeated name; so does the gateway, so the usage it
  // bills and the text it caches are what the client sees.
  auto body = read_ok(R"({"choices":{},"choices":[{"message":{"content":"first","content":"last"}}],)"
                      R"("usage":{"prompt_tokens":1},"usage":{"prompt_tokens":9,"completion_tokens":2}})");
  EXPECT_EQ(body.content, "last");
  EXPECT_EQ(body.usage.prompt_tokens, 9);
  EXPECT_EQ(body.usage.completion_tokens, 2);
  EXPECT_NE(error_of(R"({"choices":[],"choices":{"route":"x"}})"), "accepted");  // the last is no array
}

TEST(ReplyBodyTest, StreamChunksAreCheckedAsWholeJsonValues) {
  for (std::string ok : {std::string(R"({"choices":[{"delta":{"content":"你好"}}]})"), std::string("[]"),
                         std::string("1")}) {
    EXPECT_TRUE(is_valid_json(ok)) << ok;
  }
  for (std::string bad : {std::string(R"({"choices":[)"), std::string("{} {}"), std::string(""),
                          std::string("{\"a\":\"\xC3\"}")}) {
    EXPECT_FALSE(is_valid_json(bad)) << bad;
  }
  std::string text = R"({"a":1})";
  ASSERT_TRUE(is_valid_json(text));
  EXPECT_EQ(text, R"({"a":1})");  // only capacity is added
}

// The usage a stream chunk carries is read from the parse that checks it: the last top-level
// "usage" object's integer counts, and whether the chunk has choices to pass on.
TEST(ReplyBodyTest, AStreamChunksUsageIsReadFromTheSameParse) {
  auto read = [](std::string text) {
    ChunkUsage usage;
    usage.usage.prompt_tokens = -1;  // every field is set on each call
    EXPECT_TRUE(is_valid_json(text, &usage)) << text;
    return usage;
  };
  auto only = read(R"({"id":"x","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":16}})");
  EXPECT_TRUE(only.has_usage);
  EXPECT_TRUE(only.usage_only);
  EXPECT_EQ(only.usage.prompt_tokens, 31);
  EXPECT_EQ(only.usage.completion_tokens, 16);

  auto with_text = read(R"({"choices":[{"delta":{"content":"hi"}}],"usage":{"prompt_tokens":3}})");
  EXPECT_TRUE(with_text.has_usage);
  EXPECT_FALSE(with_text.usage_only);
  EXPECT_EQ(with_text.usage.prompt_tokens, 3);
  EXPECT_EQ(with_text.usage.completion_tokens, 0);

  // No choices at all; duplicate keys: the last one counts; counts that are not integers are 0.
  auto last = read(R"({"usage":{"prompt_tokens":1},"usage":{"prompt_tokens":2.5,"completion_tokens":"7"}})");
  EXPECT_TRUE(last.has_usage);
  EXPECT_TRUE(last.usage_only);
  EXPECT_EQ(last.usage.prompt_tokens, 0);
  EXPECT_EQ(last.usage.completion_tokens, 0);

  // A usage that is not an object, or nested below the top level, is no usage.
  auto none = read(R"({"choices":[{"delta":{"usage":{"prompt_tokens":5}}}],"usage":null})");
  EXPECT_FALSE(none.has_usage);
  EXPECT_FALSE(none.usage_only);
  EXPECT_EQ(none.usage.prompt_tokens, 0);
  auto array = read(R"([{"usage":{"prompt_tokens":5}}])");
  EXPECT_FALSE(array.has_usage);
  EXPECT_TRUE(array.usage_only) << "not an object: no choices to carry";
  auto null_choices = read(R"({"choices":null,"usage":{"prompt_tokens":5}})");
  EXPECT_FALSE(null_choices.usage_only) << "only a missing or empty choices array is usage-only";

  ChunkUsage untouched;
  std::string bad = R"({"usage":{"prompt_tokens":5})";
  EXPECT_FALSE(is_valid_json(bad, &untouched));
}

TEST(ReplyBodyTest, RefusedBytesStayWithTheCaller) {
  std::string raw = "{\"oops\":";
  auto body = read_reply_body(std::move(raw));
  ASSERT_FALSE(body.ok());
  EXPECT_EQ(raw, "{\"oops\":");  // the caller still has them for its error message
}

TEST(ReplyBodyTest, SplicesTheMemberAsTheLastOneAndKeepsTheUpstreamBytes) {
  const std::string raw = "{\"choices\":[{\"message\":{\"content\":\"hi\"}}],\"z\":1.50} \n";
  auto body = read_ok(raw);
  std::string out = with_member(body, "hengshi", R"({"route":"cloud-small"})");
  EXPECT_EQ(out, R"({"choices":[{"message":{"content":"hi"}}],"z":1.50,"hengshi":{"route":"cloud-small"}})");
  auto parsed = json::parse(out);
  EXPECT_EQ(parsed["hengshi"]["route"], "cloud-small");
}

TEST(ReplyBodyTest, AnUpstreamHengshiMemberIsReplacedNotRepeated) {
  auto body = read_ok(R"({"choices":[],"hengshi":{"route":"forged"}})");
  EXPECT_TRUE(body.has_hengshi);
  std::string out = with_member(body, "hengshi", R"({"route":"cloud-small"})");
  auto parsed = json::parse(out);
  EXPECT_EQ(parsed["hengshi"]["route"], "cloud-small");
  EXPECT_EQ(out.find("forged"), std::string::npos);
}

}  // namespace
}  // namespace hengshi::cloud
