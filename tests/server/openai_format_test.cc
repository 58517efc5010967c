// completion_text: the chat.completion body of every edge and cached answer, written as text.
// It must be the object the OpenAI SDKs parse, byte for byte what the DOM's dump gave, and
// valid JSON whatever bytes the content holds.
#include "server/openai_format.h"

#include <gtest/gtest.h>

#include "core/json_text.h"

namespace hengshi::server {
namespace {

using nlohmann::json;

// The object as the DOM built it before; `created` is taken from the text under test.
json expected_completion(const std::string& id, const std::string& model, const std::string& content,
                         const std::string& finish_reason, const TokenUsage& usage, std::int64_t created) {
  json message = {{"role", "assistant"}, {"content", content}};
  json choice = {{"index", 0}, {"message", message}, {"logprobs", nullptr}, {"finish_reason", finish_reason}};
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})},
          {"usage",
           {{"prompt_tokens", usage.prompt_tokens},
            {"completion_tokens", usage.completion_tokens},
            {"total_tokens", usage.prompt_tokens + usage.completion_tokens}}}};
}

TEST(CompletionText, IsTheBytesTheDomDumpGave) {
  const TokenUsage usage{12, 34};
  const std::string text = completion_text("hs-1", "intent:v1", "您好，退款 3–5 个工作日到账。\n\"quoted\" \\ \t",
                                           "stop", usage);
  const json parsed = json::parse(text);
  const json expected = expected_completion("hs-1", "intent:v1", "您好，退款 3–5 个工作日到账。\n\"quoted\" \\ \t", "stop",
                                            usage, parsed.at("created").get<std::int64_t>());
  EXPECT_EQ(text, dump_text(expected));
  EXPECT_EQ(parsed.at("usage").at("total_tokens"), 46);
  EXPECT_EQ(parsed.at("choices").at(0).at("message").at("role"), "assistant");
  EXPECT_GT(parsed.at("created").get<std::int64_t>(), 1'700'000'000);
}

TEST(CompletionText, InvalidUtf8AndControlBytesStayValidJson) {
  const std::string content = std::string("ok \xff\xfe bad \x01 end") + '\0' + "tail";
  const std::string text = completion_text("id\x80", "m", content, "length", {});
  const json parsed = json::parse(text);  // throws when the text is not JSON
  const json expected =
      expected_completion(valid_utf8("id\x80"), "m", valid_utf8(content), "length", {}, parsed.at("created").get<std::int64_t>());
  EXPECT_EQ(text, dump_text(expected));
  EXPECT_EQ(parsed.at("choices").at(0).at("message").at("content").get<std::string>(), valid_utf8(content));
}

TEST(CompletionText, AnEmptyAnswerIsStillACompleteObject) {
  const json parsed = json::parse(completion_text("", "", "", "", {}));
  EXPECT_EQ(parsed.at("object"), "chat.completion");
  EXPECT_EQ(parsed.at("choices").at(0).at("finish_reason"), "");
  EXPECT_EQ(parsed.at("usage").at("total_tokens"), 0);
}

// A stream's metadata chunk: the bytes the DOM it replaced dumped, for any id and model bytes.
TEST(MetadataChunkText, IsTheBytesTheDomDumpGave) {
  for (const std::string& id : {std::string("hs-1"), std::string("id \"q\" \x80\x01")}) {
    const std::string text = metadata_chunk_text(id, "cloud-small/gpt-4o-mini");
    const json parsed = json::parse(text);
    const json expected = {{"id", valid_utf8(id)},
                           {"object", "chat.completion.chunk"},
                           {"created", parsed.at("created").get<std::int64_t>()},
                           {"model", "cloud-small/gpt-4o-mini"},
                           {"choices", json::array()}};
    EXPECT_EQ(text, dump_text(expected)) << id;
  }
}

}  // namespace
}  // namespace hengshi::server
