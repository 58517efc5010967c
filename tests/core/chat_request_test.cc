#include "core/chat_request.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace hengshi {
namespace {

TEST(ChatRequestTest, ParsesMinimalRequest) {
  auto req = parse_chat_request(R"({"model":"cloud-small","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(req.ok()) << req.error().message;
  EXPECT_EQ(req->model, "cloud-small");
  ASSERT_EQ(req->messages.size(), 1u);
  EXPECT_EQ(req->last_user_text(), "hi");
  EXPECT_FALSE(req->stream);
}

TEST(ChatRequestTest, FlattensTextPartsAndKeepsBodyForPassThrough) {
  auto req = parse_chat_request(R"({"messages":[{"role":"system","content":"be brief"},
     {"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},{"type":"text","text":"b"}]}],
     "temperature":0.2,"stream":true,"stream_options":{"include_usage":true},"max_tokens":5,"stop":"END",
     "tools":[{"type":"function","function":{"name":"f"}}],
     "hengshi":{"task_type":"faq","session_id":"s1","deadline_ms":800,"tags":["t"]}})");
  ASSERT_TRUE(req.ok()) << req.error().message;
  EXPECT_EQ(req->last_user_text(), "a\nb");
  EXPECT_TRUE(req->stream);
  EXPECT_TRUE(req->include_usage);
  EXPECT_EQ(req->max_tokens, 5);
  ASSERT_EQ(req->stop.size(), 1u);
  EXPECT_EQ(req->hengshi.task_type, "faq");
  EXPECT_EQ(req->hengshi.session_id, "s1");
  EXPECT_EQ(req->hengshi.deadline_ms, 800);
  // The extension is ours and is not forwarded; everything else the caller sent is.
  EXPECT_FALSE(req->body().contains("hengshi"));
  EXPECT_TRUE(req->body().contains("tools"));
  EXPECT_DOUBLE_EQ(req->body()["temperature"].get<double>(), 0.2);
}

// The members forwarded as written are the body's, but the ones the upstream body writes again.
TEST(ChatRequestTest, KeepsTheMembersToForwardAsTheCallerWroteThem) {
  auto req = parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}], "temperature": 0.50,"stream":false,
          "stream_options":null,"metadata":{"b":1, "a":"x"},"hengshi":{"task_type":"faq"}})");
  ASSERT_TRUE(req.ok()) << req.error().message;
  ASSERT_TRUE(req->forwarded_members.has_value());
  EXPECT_EQ(*req->forwarded_members,
            R"("messages":[{"role":"user","content":"hi"}],"temperature":0.50,"metadata":{"b":1, "a":"x"})");
  nlohmann::json dom = req->body();
  for (std::string_view name : kMembersWrittenAgain) dom.erase(std::string(name));
  EXPECT_EQ(nlohmann::json::parse("{" + *req->forwarded_members + "}"), dom);
}

// With a repeated name anywhere, or a double below the top level, the DOM (what the router
// checked) is what goes on: an upstream must never see a value, or digits, the router did not.
TEST(ChatRequestTest, ARepeatedNameOrANestedDoubleForwardsTheDomNotTheText) {
  for (const char* body :
       {R"({"messages":[{"role":"user","content":"hi"}],"user":"a","user":"b"})",
        R"({"messages":[{"role":"user","content":"call 13800138000","content":"hi"}]})",
        R"({"messages":[{"role":"user","content":"hi"}],"metadata":{"x":{"k":1,"k":2}}})",
        // A double below the top level: the DOM keeps ~17 of the 19 digits the text holds.
        R"({"messages":[{"role":"user","content":"hi"}],"metadata":{"card":6222021234567890123.0}})"}) {
    auto req = parse_chat_request(body);
    ASSERT_TRUE(req.ok()) << req.error().message;
    EXPECT_FALSE(req->forwarded_members.has_value()) << body;
  }
  // What simdjson refuses (an integer past 64 bits) is parsed by nlohmann, which does not say.
  auto big = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"n":123456789012345678901234567890})");
  ASSERT_TRUE(big.ok()) << big.error().message;
  EXPECT_FALSE(big->forwarded_members.has_value());
}

TEST(ChatRequestTest, TheCommitModeIsOneOfThreeWords) {
  auto req = parse_chat_request(
      R"({"messages":[{"role":"user","content":"hi"}],"stream":true,"hengshi":{"commit":"never"}})");
  ASSERT_TRUE(req.ok()) << req.error().message;
  EXPECT_EQ(req->hengshi.commit, CommitMode::never);
  for (const char* bad : {R"("sometimes")", "1", "null"}) {
    auto refused = parse_chat_request(std::string(R"({"messages":[{"role":"user","content":"hi"}],"hengshi":{"commit":)") +
                                      bad + "}}");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().param, "hengshi.commit");
    EXPECT_EQ(refused.error().status, 400);
  }
}

TEST(ChatRequestTest, AssistantToolCallWithoutContentIsAccepted) {
  auto req = parse_chat_request(
      R"({"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[]},{"role":"tool","content":"r","tool_call_id":"1"}]})");
  EXPECT_TRUE(req.ok());
}

struct Bad {
  const char* body;
  const char* code;
  const char* param;
};

class ChatRequestRejectTest : public ::testing::TestWithParam<Bad> {};

// The body is read from the kept parse; its nlohmann DOM is built only when asked for, and is
// then what nlohmann's own parser makes of the body, without the extension.
TEST(ChatRequestTest, TheDomIsBuiltOnlyWhenAskedForAndIsNlohmanns) {
  for (const char* body :
       {R"({"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.5,"hengshi":{"task_type":"faq"}})",
        R"({"messages":[{"role":"user","content":"a","content":"b"}],"user":"x","user":{"y":[1,-2,2.5]}})",
        R"({"messages":[{"role":"user","content":"hi"}],"n":123456789012345678901234567890})"}) {
    auto req = parse_chat_request(body);
    ASSERT_TRUE(req.ok()) << req.error().message;
    nlohmann::json expected = nlohmann::json::parse(body);
    expected.erase("hengshi");
    const bool fell_back = std::string_view(body).find("1234567890123") != std::string_view::npos;
    // A body simdjson refused was parsed into a DOM by nlohmann: that one is kept.
    EXPECT_EQ(req->body_dom != nullptr, fell_back) << body;
    EXPECT_EQ(req->body().dump(), expected.dump()) << body;
    ASSERT_NE(req->body_dom, nullptr);
  }
}

// What simdjson refuses and nlohmann reads (an integer past 64 bits, a double to nlohmann) is
// checked as nlohmann's DOM holds it.
TEST(ChatRequestTest, AnIntegerPastSixtyFourBitsIsCheckedAsTheDoubleNlohmannReads) {
  const std::string messages = R"("messages":[{"role":"user","content":"hi"}])";
  auto tokens = parse_chat_request("{" + messages + R"(,"max_tokens":123456789012345678901234567890})");
  ASSERT_FALSE(tokens.ok());
  EXPECT_EQ(tokens.error().param, "max_tokens");
  auto seed = parse_chat_request("{" + messages + R"(,"seed":123456789012345678901234567890})");
  ASSERT_FALSE(seed.ok());
  EXPECT_EQ(seed.error().param, "seed");
  auto temperature = parse_chat_request("{" + messages + R"(,"temperature":1,"n":123456789012345678901234567890})");
  ASSERT_TRUE(temperature.ok()) << temperature.error().message;
  EXPECT_EQ(temperature->temperature, 1.0);
}

// The extension's fields are checked in the order of their names, the last of a repeated one
// counting, as when they were read from the DOM.
TEST(ChatRequestTest, TheExtensionIsReadAsItsDomReads) {
  const std::string messages = R"("messages":[{"role":"user","content":"hi"}])";
  auto first_by_name = parse_chat_request("{" + messages + R"(,"hengshi":{"zzz":1,"cache":"yes"}})");
  ASSERT_FALSE(first_by_name.ok());
  EXPECT_EQ(first_by_name.error().param, "hengshi.cache");
  auto repeated = parse_chat_request(
      "{" + messages + R"(,"hengshi":{"task_type":5,"tags":["a"],"task_type":"faq","tags":["b","c"]}})");
  ASSERT_TRUE(repeated.ok()) << repeated.error().message;
  EXPECT_EQ(repeated->hengshi.task_type, "faq");
  EXPECT_EQ(repeated->hengshi.tags, (std::vector<std::string>{"b", "c"}));
  auto last_message_field = parse_chat_request(R"({"messages":[{"role":7,"role":"user","content":"hi"}]})");
  ASSERT_TRUE(last_message_field.ok()) << last_message_field.error().message;
}

TEST(ChatRequestTest, SetBodyGivesBothForms) {
  ChatRequest request;
  request.forwarded_members = "\"x\":1";
  request.set_body({{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream_options", {{"include_usage", true}}}});
  EXPECT_FALSE(request.forwarded_members.has_value());
  EXPECT_TRUE(request.sent_stream_options());
  EXPECT_EQ(request.body()["messages"][0]["content"], "hi");
  EXPECT_NE(request.parsed_body, nullptr);  // the router's walk reads this form
}

TEST_P(ChatRequestRejectTest, RejectsWithOpenAiError) {
  auto req = parse_chat_request(GetParam().body);
  ASSERT_FALSE(req.ok());
  EXPECT_EQ(req.error().status, 400);
  EXPECT_EQ(req.error().type, "invalid_request_error");
  EXPECT_EQ(req.error().code, GetParam().code);
  EXPECT_EQ(req.error().param, GetParam().param);
  auto json = req.error().to_json();
  EXPECT_TRUE(json["error"]["message"].is_string());
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ChatRequestRejectTest,
    ::testing::Values(
        Bad{"{not json", "invalid_json", ""}, Bad{"[1,2]", "invalid_type", ""},
        Bad{"{}", "missing_required_parameter", "messages"},
        Bad{R"({"messages":[]})", "invalid_value", "messages"},
        Bad{R"({"messages":"hi"})", "invalid_type", "messages"},
        Bad{R"({"messages":[42]})", "invalid_type", "messages[0]"},
        Bad{R"({"messages":[{"content":"x"}]})", "missing_required_parameter", "messages[0].role"},
        Bad{R"({"messages":[{"role":"wizard","content":"x"}]})", "invalid_value", "messages[0].role"},
        Bad{R"({"messages":[{"role":"user"}]})", "missing_required_parameter", "messages[0].content"},
        Bad{R"({"messages":[{"role":"user","content":7}]})", "invalid_type", "messages[0].content"},
        Bad{R"({"model":3,"messages":[{"role":"user","content":"x"}]})", "invalid_type", "model"},
        Bad{R"({"stream":"yes","messages":[{"role":"user","content":"x"}]})", "invalid_type", "stream"},
        Bad{R"({"max_tokens":0,"messages":[{"role":"user","content":"x"}]})", "invalid_value", "max_tokens"},
        Bad{R"({"temperature":"hot","messages":[{"role":"user","content":"x"}]})", "invalid_type", "temperature"},
        Bad{R"({"stop":[1],"messages":[{"role":"user","content":"x"}]})", "invalid_type", "stop"},
        Bad{R"({"hengshi":{"deadline_ms":-5},"messages":[{"role":"user","content":"x"}]})", "invalid_value",
            "hengshi.deadline_ms"},
        Bad{R"({"hengshi":{"colour":"red"},"messages":[{"role":"user","content":"x"}]})", "unknown_parameter",
            "hengshi.colour"}));

}  // namespace
}  // namespace hengshi
