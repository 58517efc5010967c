#include "sim/chat_response.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "sim/completion_text.h"

namespace hengshi::sim {
namespace {

using nlohmann::json;

ChatRequest request_with(const std::string& body) {
  auto parsed = parse_chat_request(body);
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
  return *parsed;
}

RequestPlan tokens(std::int64_t count) {
  RequestPlan plan;
  plan.output_tokens = count;
  return plan;
}

json parse_event(const std::string& text) {
  EXPECT_EQ(text.rfind("data: ", 0), 0u) << text;
  EXPECT_EQ(text.substr(text.size() - 2), "\n\n");
  return json::parse(text.substr(6, text.size() - 8));
}

TEST(CompletionTextTest, TagThenEchoThenFiller) {
  EXPECT_EQ(count_words("  one\ttwo\n three  "), 3);
  EXPECT_EQ(count_words(""), 0);
  auto words = completion_words("pool-a", "gpt-x", "hello   big\nworld", 6);
  ASSERT_EQ(words.size(), 6u);
  EXPECT_EQ(words[0], "[pool-a/gpt-x]");
  EXPECT_EQ(words[1], "hello");
  EXPECT_EQ(words[3], "world");
  EXPECT_EQ(words[4], "lorem");
  EXPECT_EQ(completion_words("s", "m", "a b c d", 2).size(), 2u);
  EXPECT_EQ(completion_words("s", "m", "a b", 0).size(), 1u);  // the tag always stays
}

TEST(ChatResponseTest, CompletionBodyHasOpenAiShapeAndSimObject) {
  ChatRequest request = request_with(
      R"({"model":"m1","messages":[{"role":"system","content":"be brief"},
          {"role":"user","content":"say \"hi\" now"}]})");
  Completion completion = make_completion("sim-a", request, tokens(5));
  EXPECT_EQ(completion.prompt_tokens, 5);
  EXPECT_EQ(completion.finish_reason, "stop");

  json body = json::parse(completion_body({"sim-a", "m1", 17, 1700000000}, completion));
  EXPECT_EQ(body["id"], "chatcmpl-sim-17");
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["created"], 1700000000);
  EXPECT_EQ(body["model"], "m1");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], "[sim-a/m1] say \"hi\" now lorem");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(body["usage"],
            (json{{"prompt_tokens", 5}, {"completion_tokens", 5}, {"total_tokens", 10}}));
  EXPECT_EQ(body["sim"], (json{{"name", "sim-a"}, {"model", "m1"}, {"request_index", 17}}));
}

TEST(ChatResponseTest, MaxTokensCutsTheAnswer) {
  ChatRequest request =
      request_with(R"({"model":"m","max_tokens":3,"messages":[{"role":"user","content":"x"}]})");
  Completion completion = make_completion("s", request, tokens(10));
  EXPECT_EQ(completion.words.size(), 3u);
  EXPECT_EQ(completion.finish_reason, "length");
}

TEST(ChatResponseTest, StreamEventsInOrder) {
  ChatRequest request =
      request_with(R"({"model":"m","messages":[{"role":"user","content":"a b"}]})");
  Completion completion = make_completion("s", request, tokens(4));
  auto events = stream_events({"s", "m", 3, 1}, completion, /*include_usage=*/true, false);
  ASSERT_EQ(events.size(), 1 + 4 + 1 + 1 + 1u);

  json role = parse_event(events[0].text);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (std::size_t i = 1; i <= 4; ++i) {
    EXPECT_EQ(events[i].paced, i > 1);
    content += parse_event(events[i].text)["choices"][0]["delta"]["content"].get<std::string>();
  }
  EXPECT_EQ(content, "[s/m] a b lorem");
  json finish = parse_event(events[5].text);
  EXPECT_EQ(finish["choices"][0]["finish_reason"], "stop");
  json usage = parse_event(events[6].text);
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["completion_tokens"], 4);
  EXPECT_EQ(usage["sim"]["request_index"], 3);
  EXPECT_EQ(events[7].text, "data: [DONE]\n\n");

  auto without_usage = stream_events({"s", "m", 3, 1}, completion, false, /*garbage=*/true);
  ASSERT_EQ(without_usage.size(), events.size());  // a garbage event in place of usage
  EXPECT_FALSE(json::accept(without_usage[1].text.substr(6)));
  EXPECT_EQ(without_usage.back().text, "data: [DONE]\n\n");
}

TEST(ChatResponseTest, InjectedErrorsAreOpenAiErrors) {
  json error = injected_server_error("s").to_json();
  EXPECT_EQ(error["error"]["type"], "server_error");
  EXPECT_EQ(injected_server_error("s").status, 500);
  ApiError limited = injected_rate_limit("s", 9);
  EXPECT_EQ(limited.status, 429);
  EXPECT_EQ(limited.to_json()["error"]["code"], "rate_limit_exceeded");
  EXPECT_FALSE(json::accept(garbage_body()));
}

}  // namespace
}  // namespace hengshi::sim
