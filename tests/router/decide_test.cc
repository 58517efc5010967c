#include "router/decide.h"

#include "core/response_meta.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "router/complexity.h"
#include "router/router_policy.h"
#include "router/thresholds.h"
#include "support/pii_samples.h"

namespace hengshi::router {
namespace {

using Clock = std::chrono::steady_clock;

// ---- PII fixtures, computed rather than copied so the checksums are known to be right ----

using testing::id_check_char;  // support/pii_samples.h
using testing::luhn_valid;

// `prefix` followed by the Luhn check digit that makes the whole number valid.
std::string luhn_complete(std::string prefix) {
  for (char check = '0'; check <= '9'; ++check) {
    if (luhn_valid(prefix + check)) return prefix + check;
  }
  return prefix;  // unreachable: one of ten digits always fits
}

// Born 1990-03-07 in Beijing (110105), sequence 123.
constexpr std::string_view kIdFirst17 = "11010519900307123";

std::string valid_id() { return std::string(kIdFirst17) + id_check_char(kIdFirst17); }

// Same 17 digits, a wrong check digit, and not Luhn-valid either (else it would be a bank card).
std::string id_with_wrong_checksum() {
  for (char check = '0'; check <= '9'; ++check) {
    std::string candidate = std::string(kIdFirst17) + check;
    if (check != id_check_char(kIdFirst17) && !luhn_valid(candidate)) return candidate;
  }
  return "";
}

std::string valid_card() { return luhn_complete("622202123456789"); }

std::string luhn_invalid_card() {
  std::string card = valid_card();
  card.back() = static_cast<char>('0' + (card.back() - '0' + 1) % 10);
  return card;
}

constexpr std::string_view kMobile = "13812345678";
constexpr std::string_view kEmail = "li.lei@example.com";

// ---- policy, prediction and input helpers ----

std::shared_ptr<const RouterPolicy> policy_from(const std::string& yaml,
                                                const std::string& thresholds_file = "") {
  auto policy = parse_router_policy(yaml, "test-policy.yaml", thresholds_file);
  EXPECT_TRUE(policy.ok()) << (policy.ok() ? "" : policy.error().message);
  return policy.ok() ? *policy : nullptr;
}

const RouterPolicy& default_policy() {
  static const std::shared_ptr<const RouterPolicy> policy = policy_from("");
  return *policy;
}

edge::IntentPrediction in_scope(double confidence, std::string intent = "opening_hours",
                                std::string answer = "We are open 9:00-18:00, Monday to Friday.") {
  edge::IntentPrediction prediction;
  prediction.intent = std::move(intent);
  prediction.answer = std::move(answer);
  prediction.confidence = confidence;
  prediction.raw_probability = confidence;
  prediction.margin = confidence / 2;
  prediction.second_intent = "shipping";
  prediction.is_oos = false;
  return prediction;
}

edge::IntentPrediction out_of_scope() {
  edge::IntentPrediction prediction;
  prediction.intent = "__oos__";
  prediction.confidence = 0.95;
  prediction.is_oos = true;
  return prediction;
}

// A one-message conversation; `texts` must outlive the input (RouteInput holds views).
RouteInput input_for(const std::vector<std::string>& texts) {
  RouteInput input;
  for (const std::string& text : texts) input.texts.emplace_back(text);
  input.last_user_text = input.texts.back();
  input.turns = static_cast<int>(texts.size());
  input.task_type = "faq";
  input.pools = {"cloud-small", "cloud-large"};
  return input;
}

// Scores 5: long, several reasoning and constraint cues, many questions.
const std::string kAnalyticalText =
    "Please explain why the two approaches differ, compare their trade-offs step by step, and "
    "analyze how each one behaves under load. Why would one choose the first over the second? "
    "How does caching change the answer? You must answer as a table, and list at least three "
    "risks for each option. Then prove that the cheaper option is never slower when the cache is "
    "warm.";
const std::string kSimpleText = "What are your opening hours?";  // scores 1
const std::string kFairlySimpleText = "How do I reset my password? And why is it required?";  // 2

class DecideTest : public ::testing::Test {
 protected:
  Decision run(const RouteInput& input, const RouterPolicy& policy = default_policy()) {
    Decision decision = decide(input, policy, runtime_, now_);
    EXPECT_EQ(decision.figures.value("policy", ""), policy.version) << decision.figures.dump();
    return decision;
  }

  RouterRuntime runtime_{default_policy()};
  Clock::time_point now_ = Clock::now();
};

void expect_route(const Decision& decision, std::string_view route, std::string_view reason,
                  std::string_view fallback_type = "") {
  EXPECT_EQ(to_string(decision.route), route) << decision.figures.dump();
  EXPECT_EQ(to_string(decision.reason), reason) << decision.figures.dump();
  EXPECT_EQ(to_string(decision.fallback_type), fallback_type) << decision.figures.dump();
}

// ---- sanity of the fixtures themselves ----

TEST(DecideFixtureTest, PiiFixturesAreWhatTheTestsClaim) {
  const PiiDetector& pii = default_policy().pii;
  EXPECT_EQ(valid_id().size(), 18u);
  EXPECT_EQ(valid_card().size(), 16u);
  EXPECT_TRUE(luhn_valid(valid_card()));
  EXPECT_FALSE(luhn_valid(luhn_invalid_card()));
  ASSERT_EQ(id_with_wrong_checksum().size(), 18u);
  EXPECT_FALSE(luhn_valid(id_with_wrong_checksum()));
  const auto kind_of = [&](const std::string& text) {
    const auto matches = pii.find(text);
    return matches.size() == 1 ? matches[0].kind : "<" + std::to_string(matches.size()) + ">";
  };
  EXPECT_EQ(kind_of(std::string(kMobile)), "mobile_cn");
  EXPECT_EQ(kind_of(valid_id()), "id_cn");
  EXPECT_EQ(kind_of(valid_card()), "bank_card");
  EXPECT_EQ(kind_of(std::string(kEmail)), "email");
  EXPECT_EQ(complexity_score(complexity_features(kAnalyticalText, 1)), 5);
  EXPECT_EQ(complexity_score(complexity_features(kSimpleText, 1)), 1);
  EXPECT_EQ(complexity_score(complexity_features(kFairlySimpleText, 1)), 2);
}

// ---- 1. hard constraints: PII ----

struct PiiItem {
  std::string kind;
  std::string text;
};

std::vector<PiiItem> pii_items() {
  return {{"mobile_cn", "call me on " + std::string(kMobile) + " please"},
          {"id_cn", "我的身份证号是" + valid_id() + "，帮我查一下"},
          {"bank_card", "card " + valid_card() + " was charged twice"},
          {"email", "mail me at " + std::string(kEmail)}};
}

TEST_F(DecideTest, PiiInAnyMessagePinsToTheEdgeAndNeverTheCloud) {
  for (const PiiItem& item : pii_items()) {
    for (bool in_earlier_message : {false, true}) {
      SCOPED_TRACE(item.kind + (in_earlier_message ? " in an earlier message" : " in the last"));
      const std::vector<std::string> texts =
          in_earlier_message ? std::vector<std::string>{item.text, "ok", kSimpleText}
                             : std::vector<std::string>{"hello", item.text};
      RouteInput input = input_for(texts);

      // An in-scope intent answer at >= high: the intent engine answers.
      const edge::IntentPrediction confident = in_scope(0.95);
      input.prediction = &confident;
      input.llm_available = true;
      Decision decision = run(input);
      expect_route(decision, "edge", "pii_pin");
      EXPECT_EQ(to_string(decision.edge_engine), "intent");
      EXPECT_EQ(decision.figures["pii"], nlohmann::json::array({item.kind}));

      // Below high (or out of scope): the edge LLM when there is one.
      const edge::IntentPrediction middling = in_scope(0.84);
      const edge::IntentPrediction oos = out_of_scope();
      for (const edge::IntentPrediction* prediction :
           {&middling, &oos, static_cast<const edge::IntentPrediction*>(nullptr)}) {
        input.prediction = prediction;
        input.llm_available = true;
        decision = run(input);
        expect_route(decision, "edge", "pii_pin");
        EXPECT_EQ(to_string(decision.edge_engine), "llm");

        // No edge engine can answer: fail closed with the safe message.
        input.llm_available = false;
        decision = run(input);
        expect_route(decision, "refuse", "pii_pin");
        EXPECT_EQ(to_string(decision.edge_engine), "");
      }
    }
  }
}

TEST_F(DecideTest, PiiIntentAnswerNeedsACannedAnswer) {
  const std::vector<std::string> texts = {"email " + std::string(kEmail)};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction no_answer = in_scope(0.99, "opening_hours", "");
  input.prediction = &no_answer;
  expect_route(run(input), "refuse", "pii_pin");
  input.llm_available = true;
  EXPECT_EQ(to_string(run(input).edge_engine), "llm");
}

TEST_F(DecideTest, PiiFiguresListEveryKindOnce) {
  const std::vector<std::string> texts = {
      "my number is " + std::string(kMobile) + ", again " + std::string(kMobile),
      "id " + valid_id() + " and card " + valid_card(), "and " + std::string(kEmail)};
  const Decision decision = run(input_for(texts));
  expect_route(decision, "refuse", "pii_pin");
  EXPECT_EQ(decision.figures["pii"],
            nlohmann::json::array({"mobile_cn", "id_cn", "bank_card", "email"}));
}

TEST_F(DecideTest, PiiUsesTheIntentsOwnBand) {
  ThresholdsFile file;
  file.version = "thr-pii";
  file.intents = {{"opening_hours", Band{0.6, 0.3}}};
  RouterPolicy policy = default_policy();
  policy.thresholds = *Thresholds::create(file);
  const std::vector<std::string> texts = {"call " + std::string(kMobile)};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction prediction = in_scope(0.7);  // >= 0.6 for this intent, < 0.85
  input.prediction = &prediction;
  const Decision decision = decide(input, policy, runtime_, now_);
  expect_route(decision, "edge", "pii_pin");
  EXPECT_EQ(to_string(decision.edge_engine), "intent");
}

TEST_F(DecideTest, NearMissNumbersAreNotPii) {
  for (const std::string& number : {id_with_wrong_checksum(), luhn_invalid_card()}) {
    SCOPED_TRACE(number);
    const std::vector<std::string> texts = {"my order number is " + number};
    RouteInput input = input_for(texts);
    const edge::IntentPrediction prediction = in_scope(0.95);
    input.prediction = &prediction;
    const Decision decision = run(input);
    EXPECT_NE(to_string(decision.reason), "pii_pin");
    EXPECT_FALSE(decision.figures.contains("pii"));
    expect_route(decision, "edge", "high_confidence");
  }
}

// ---- 1. hard constraints: PII anywhere in the forwarded body, and parts it cannot read ----

using nlohmann::json;

json text_part(const std::string& text) { return {{"type", "text"}, {"text", text}}; }
json user_message(json content) { return {{"role", "user"}, {"content", std::move(content)}}; }

// What parse_chat_request makes of `body`, as the server would route it.
ChatRequest parsed(const json& body) {
  auto request = parse_chat_request(body.dump());
  EXPECT_TRUE(request.ok()) << (request.ok() ? "" : request.error().message) << "\n" << body.dump();
  return request.ok() ? std::move(*request) : ChatRequest{};
}

RouteInput routed(const ChatRequest& request) {
  RouteInput input = route_input(request, Budget::after(Millis(60'000)));
  input.pools = {"cloud-small", "cloud-large"};
  return input;
}

// A plain request whose messages say nothing personal; `edit` puts the PII somewhere else.
json harmless_body() {
  return {{"model", "auto"}, {"messages", json::array({user_message(kSimpleText)})}};
}

struct BodyPlace {
  std::string name;
  json body;
};

// Every place outside the message text where a caller's string is forwarded upstream.
std::vector<BodyPlace> pii_outside_the_messages(const std::string& pii) {
  std::vector<BodyPlace> places;
  const auto with = [&](const std::string& name, auto edit) {
    json body = harmless_body();
    edit(body);
    places.push_back({name, std::move(body)});
  };
  with("tool call arguments", [&](json& body) {
    body["messages"] = json::array(
        {user_message("look me up"),
         {{"role", "assistant"},
          {"content", nullptr},
          {"tool_calls",
           json::array(
               {{{"id", "call_1"},
                 {"type", "function"},
                 {"function", {{"name", "lookup"}, {"arguments", json{{"who", pii}}.dump()}}}}})}},
         {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "found"}},
         user_message(kSimpleText)});
  });
  with("message name", [&](json& body) { body["messages"][0]["name"] = pii; });
  with("user", [&](json& body) { body["user"] = pii; });
  with("metadata value", [&](json& body) { body["metadata"] = {{"contact", pii}}; });
  with("metadata key", [&](json& body) { body["metadata"] = {{pii, "contact"}}; });
  const auto tool = [](const std::string& name, const std::string& description, json parameters) {
    return json{
        {"type", "function"},
        {"function",
         {{"name", name}, {"description", description}, {"parameters", std::move(parameters)}}}};
  };
  const json no_parameters = {{"type", "object"}, {"properties", json::object()}};
  with("tool description", [&](json& body) {
    body["tools"] = json::array({tool("notify", "notifies " + pii, no_parameters)});
  });
  with("tool parameters", [&](json& body) {
    body["tools"] = json::array({tool(
        "notify", "notifies someone",
        {{"type", "object"}, {"properties", {{"to", {{"type", "string"}, {"default", pii}}}}}})});
  });
  with("function name", [&](json& body) {
    body["tools"] = json::array({tool("notify_" + pii, "notifies someone", no_parameters)});
  });
  with("legacy functions", [&](json& body) {
    body["functions"] = json::array({{{"name", "notify"}, {"description", "to " + pii}}});
  });
  with("prediction", [&](json& body) {
    body["prediction"] = {{"type", "content"}, {"content", "draft reply to " + pii}};
  });
  with("prediction parts", [&](json& body) {
    body["prediction"] = {{"type", "content"}, {"content", json::array({text_part("to " + pii)})}};
  });
  with("stop", [&](json& body) { body["stop"] = json::array({pii}); });
  return places;
}

TEST_F(DecideTest, PiiAnywhereInTheForwardedBodyPinsToTheEdge) {
  const std::vector<std::pair<std::string, std::string>> items = {
      {"mobile_cn", std::string(kMobile)},
      {"mobile_cn", "138.1234.5678"},
      {"id_cn", valid_id()},
      {"bank_card", valid_card()},
      {"email", std::string(kEmail)},
      {"email", "张三＠example．com"}};
  for (const auto& [kind, pii] : items) {
    for (const BodyPlace& place : pii_outside_the_messages(pii)) {
      SCOPED_TRACE(kind + " " + pii + " in " + place.name);
      const ChatRequest request = parsed(place.body);
      for (const std::string_view text : route_input(request, Budget::after(Millis(1))).texts) {
        ASSERT_FALSE(default_policy().pii.contains(text)) << "the PII must not be in a message";
      }
      RouteInput input = routed(request);
      for (const std::string model : {"auto", "cloud-large", "cloud-small"}) {
        input.model = model;  // not even a pinned cloud pool reaches upstream
        input.llm_available = true;
        Decision decision = run(input);
        expect_route(decision, "edge", "pii_pin");
        EXPECT_EQ(to_string(decision.edge_engine), "llm");
        EXPECT_EQ(decision.figures["pii"], json::array({kind}));
        input.llm_available = false;
        expect_route(run(input), "refuse", "pii_pin");
      }
    }
  }
}

TEST_F(DecideTest, NumbersBelowTheTopLevelAreScannedTopLevelParametersAreNot) {
  json body = harmless_body();
  body["metadata"] = {{"phone", 13812345678}};
  expect_route(run(routed(parsed(body))), "refuse", "pii_pin");
  // The same number as a JSON double, in the forms a caller may write it: its digits still leave.
  for (const char* form : {"13812345678.0", "1.3812345678e10", "138123456780e-1"}) {
    SCOPED_TRACE(form);
    const auto request = parse_chat_request(
        std::string(R"({"model":"auto","messages":[{"role":"user","content":"hello"}],"metadata":{"phone":)") +
        form + "}}");
    ASSERT_TRUE(request.ok()) << request.error().message;
    expect_route(run(routed(*request)), "refuse", "pii_pin");
  }
  // A fraction is scanned as written and is no phone number; a top-level one is the API's own.
  body = harmless_body();
  body["metadata"] = {{"score", 0.25}};
  body["temperature"] = 0.5;
  expect_route(run(routed(parsed(body))), "cloud-small", "default_pool");
  body = harmless_body();
  body["tools"] =
      json::array({{{"type", "function"},
                    {"function", {{"name", "f"}, {"parameters", {{"default", 13812345678}}}}}}});
  expect_route(run(routed(parsed(body))), "refuse", "pii_pin");
  // A seed is the API's own number, not the caller's data.
  body = harmless_body();
  body["seed"] = 13812345678;
  expect_route(run(routed(parsed(body))), "cloud-small", "default_pool");
}

TEST_F(DecideTest, PiiSplitAcrossContentPartsIsCaught) {
  const std::vector<std::vector<std::string>> splits = {
      {"call me on 138", "12345678"},
      {"call me on 138 1234", " 5678"},
      {"call me on ", "138", ".1234.", "5678", " thanks"},
      {"id ", valid_id().substr(0, 9), valid_id().substr(9)},
      {"card ", valid_card().substr(0, 8), valid_card().substr(8)},
      {"mail li.lei@", "example.com"},
      {"mail li.lei", "@example", ".com"}};
  for (const auto& parts : splits) {
    SCOPED_TRACE(parts[1]);
    json content = json::array();
    for (const std::string& part : parts) content.push_back(text_part(part));
    const ChatRequest request = parsed({{"messages", json::array({user_message(content)})}});
    // The flattened text joins parts with a newline, which hides the number.
    ASSERT_FALSE(default_policy().pii.contains(request.messages[0].text));
    expect_route(run(routed(request)), "refuse", "pii_pin");
  }
  // Parts that only look alike when joined stay harmless: an 8-digit order number.
  const ChatRequest order = parsed(
      {{"messages",
        json::array({user_message(json::array({text_part("order 1234"), text_part("5678")}))})}});
  expect_route(run(routed(order)), "cloud-small", "default_pool");
}

json with_part(json part) {
  return {{"messages",
           json::array({user_message(json::array({text_part(kSimpleText), std::move(part)}))})}};
}

const json kImagePart = {{"type", "image_url"},
                         {"image_url", {{"url", "https://example.com/a.png"}}}};
const json kAudioPart = {{"type", "input_audio"},
                         {"input_audio", {{"data", "UklGRg=="}, {"format", "wav"}}}};
const json kFilePart = {{"type", "file"}, {"file", {{"file_id", "file-1"}}}};

TEST_F(DecideTest, NonTextPartsArePinnedLikePiiByDefault) {
  for (const json& part : {kImagePart, kAudioPart, kFilePart}) {
    const std::string kind = part["type"];
    SCOPED_TRACE(kind);
    const ChatRequest request = parsed(with_part(part));
    RouteInput input = routed(request);
    EXPECT_TRUE(input.has_non_text_parts);
    EXPECT_EQ(input.non_text_kinds, std::vector<std::string>{kind});

    const edge::IntentPrediction confident = in_scope(0.95);
    input.prediction = &confident;
    Decision decision = run(input);
    expect_route(decision, "edge", "pii_uncheckable");
    EXPECT_EQ(to_string(decision.edge_engine), "intent");
    EXPECT_EQ(decision.figures["non_text_parts"], json::array({kind}));
    EXPECT_FALSE(decision.figures.contains("pii"));

    input.prediction = nullptr;
    input.llm_available = true;
    for (const std::string model : {"auto", "cloud-large", "cloud-small"}) {
      input.model = model;
      decision = run(input);
      expect_route(decision, "edge", "pii_uncheckable");
      EXPECT_EQ(to_string(decision.edge_engine), "llm");
    }
    input.llm_available = false;
    expect_route(run(input), "refuse", "pii_uncheckable");
  }
}

TEST_F(DecideTest, NonTextPartsCanBeRefusedByPolicy) {
  const auto policy = policy_from("pii: {non_text_parts: refuse}\n");
  json body = with_part(kImagePart);
  body["messages"].push_back(user_message(json::array({kAudioPart, kImagePart, text_part("hi")})));
  const ChatRequest request = parsed(body);  // RouteInput holds views into it
  RouteInput input = routed(request);
  EXPECT_EQ(input.non_text_kinds, (std::vector<std::string>{"image_url", "input_audio"}));
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  input.llm_available = true;
  input.model = "cloud-large";
  Decision decision = run(input, *policy);
  expect_route(decision, "refuse", "non_text_refused");
  EXPECT_EQ(decision.figures["non_text_parts"], json::array({"image_url", "input_audio"}));

  // With PII as well: still refused, and both are in the figures.
  body["user"] = std::string(kEmail);
  const ChatRequest with_pii = parsed(body);
  decision = run(routed(with_pii), *policy);
  expect_route(decision, "refuse", "non_text_refused");
  EXPECT_EQ(decision.figures["pii"], json::array({"email"}));

  // A text-only request is not affected by the setting.
  expect_route(run(routed(parsed(harmless_body())), *policy), "cloud-small", "default_pool");
}

TEST_F(DecideTest, MediaOutsideContentPartsIsNonText) {
  json body = harmless_body();
  body["audio"] = {{"voice", "alloy"}, {"format", "wav"}};  // output settings: nothing to check
  body["modalities"] = json::array({"text", "audio"});
  expect_route(run(routed(parsed(body))), "cloud-small", "default_pool");

  body["audio"]["data"] = "UklGRg==";
  expect_route(run(routed(parsed(body))), "refuse", "pii_uncheckable");

  body = harmless_body();
  body["input_audio"] = {{"data", "UklGRg=="}};
  EXPECT_EQ(routed(parsed(body)).non_text_kinds, std::vector<std::string>{"input_audio"});

  body = harmless_body();
  body["prediction"] = {{"type", "content"}, {"content", json::array({kImagePart})}};
  EXPECT_EQ(routed(parsed(body)).non_text_kinds, std::vector<std::string>{"image_url"});

  // Every media field is read, in one fixed order whatever the body's; null ones are absent.
  body = harmless_body();
  for (const char* field : {"image", "input_file", "file", "input_image", "image_url", "input_audio"}) {
    body[field] = {{"data", "x"}};
  }
  body["audio"] = {{"data", "UklGRg=="}};
  body["image"] = nullptr;
  EXPECT_EQ(routed(parsed(body)).non_text_kinds,
            (std::vector<std::string>{"input_audio", "image_url", "input_image", "file", "input_file", "audio"}));

  // A caller's own type name never reaches the figures as such.
  const Decision decision = run(routed(parsed(with_part({{"type", "hologram"}}))));
  expect_route(decision, "refuse", "pii_uncheckable");
  EXPECT_EQ(decision.figures["non_text_parts"], json::array({"other"}));
}

TEST_F(DecideTest, ANonEmptyToolsOrFunctionsArrayMeansTools) {
  json body = harmless_body();
  EXPECT_FALSE(routed(parsed(body)).has_tools);
  body["tools"] = json::array();
  body["functions"] = json::array();
  EXPECT_FALSE(routed(parsed(body)).has_tools);
  body["functions"] = json::array({{{"name", "f"}}});
  EXPECT_TRUE(routed(parsed(body)).has_tools);
  body.erase("functions");
  body["tools"] = json::array({{{"type", "function"}, {"function", {{"name", "f"}}}}});
  EXPECT_TRUE(routed(parsed(body)).has_tools);
}

TEST_F(DecideTest, RefusalPartsAreText) {
  json body = harmless_body();
  body["messages"].push_back(
      {{"role", "assistant"},
       {"content", json::array({{{"type", "refusal"}, {"refusal", "I cannot call 138"}},
                                text_part("12345678")})}});
  body["messages"].push_back(user_message(kSimpleText));
  const ChatRequest request = parsed(body);
  const RouteInput input = routed(request);
  EXPECT_FALSE(input.has_non_text_parts);
  expect_route(run(input), "refuse", "pii_pin");  // the parts joined: "...138" + "12345678"
}

// The walk reads the request's parse as its DOM holds the body: a repeated name's last value (the
// one an upstream gets, written from the DOM) and not the hidden first. It builds no DOM.
TEST_F(DecideTest, BodyWalkReadsTheParseAsTheDomHoldsIt) {
  const std::string messages = R"("messages":[{"role":"user","content":"hi"}])";
  auto hidden = parse_chat_request("{" + messages + R"(,"user":"13812345678","user":"anonymous"})");
  ASSERT_TRUE(hidden.ok());
  expect_route(run(routed(*hidden)), "cloud-small", "default_pool");
  auto last = parse_chat_request("{" + messages + R"(,"user":"anonymous","user":"13812345678"})");
  ASSERT_TRUE(last.ok());
  expect_route(run(routed(*last)), "refuse", "pii_pin");
  // Keys are read too, and the extension is not (it never goes upstream).
  auto key = parse_chat_request("{" + messages + R"(,"metadata":{"13812345678":1},"hengshi":{"tags":["x"]}})");
  ASSERT_TRUE(key.ok());
  const RouteInput input = routed(*key);
  EXPECT_NE(std::find(input.forwarded_strings.begin(), input.forwarded_strings.end(), "13812345678"),
            input.forwarded_strings.end());
  EXPECT_EQ(std::find(input.forwarded_strings.begin(), input.forwarded_strings.end(), "tags"),
            input.forwarded_strings.end());
  EXPECT_EQ(key->body_dom, nullptr) << "routing built the DOM";
}

TEST_F(DecideTest, BodyWalkIsBoundedInDepth) {
  ChatRequest request = parsed(harmless_body());
  json deep = "13812345678";
  for (int depth = 0; depth < 63; ++depth) deep = json::array({std::move(deep)});
  json body = request.body();
  body["metadata"] = deep;  // the string sits at depth 64: still read
  request.set_body(body);
  RouteInput input = routed(request);
  EXPECT_FALSE(input.has_non_text_parts);
  expect_route(run(input), "refuse", "pii_pin");

  // Deeper than the walk goes (the parser already stops at 64): not checked, so not forwarded.
  json deeper = "harmless";
  for (int depth = 0; depth < kMaxScanDepth + 10; ++depth)
    deeper = json::array({std::move(deeper)});
  body["metadata"] = deeper;
  request.set_body(body);
  input = routed(request);
  EXPECT_EQ(input.non_text_kinds, std::vector<std::string>{"nesting_too_deep"});
  expect_route(run(input), "refuse", "pii_uncheckable");
}

TEST_F(DecideTest, PiiDisabledTurnsTheWholeStageOff) {
  const auto policy = policy_from("pii: {enabled: false, non_text_parts: refuse}\n");
  json body = with_part(kImagePart);
  body["user"] = std::string(kEmail);
  expect_route(run(routed(parsed(body)), *policy), "cloud-small", "default_pool");
}

TEST_F(DecideTest, PiiDisabledInThePolicyIsNotAPin) {
  const auto policy = policy_from("pii: {enabled: false}\n");
  const std::vector<std::string> texts = {"call " + std::string(kMobile)};
  const Decision decision = run(input_for(texts), *policy);
  expect_route(decision, "cloud-small", "default_pool");
}

bool has_pii_in_texts(const ChatRequest& request, const RouterPolicy& policy) {
  return std::any_of(request.messages.begin(), request.messages.end(),
                     [&](const ChatMessage& message) { return policy.pii.contains(message.text); });
}

// Everything a request can carry, at random, plus some PII — in a message, split across content
// parts, or anywhere else in the body that goes upstream — or a part the scan cannot read: the
// answer is always the edge or the safe refusal, never a cloud pool or a human (a hand-off would
// show the PII to the agent's tools).
TEST_F(DecideTest, PropertyPiiIsNeverSentToTheCloudWhateverElseTheRequestSays) {
  std::mt19937 random(20261129);
  const auto pick = [&](const auto& options) {
    return options[std::uniform_int_distribution<std::size_t>(0, std::size(options) - 1)(random)];
  };
  const auto chance = [&](double p) { return std::bernoulli_distribution(p)(random); };
  const auto uniform = [&](double from, double to) {
    return std::uniform_real_distribution<double>(from, to)(random);
  };
  const std::vector<std::string> pii = {std::string(kMobile), valid_id(), valid_card(),
                                        std::string(kEmail), "+86 138-1234-5678"};
  const std::vector<std::string> sensitive = {"转人工", "my card was stolen",         "盗刷",
                                              "投诉",   "I want to speak to a human", "fraud"};
  const std::vector<std::string> tasks = {"",     "faq",       "chitchat",   "summarize",
                                          "code", "reasoning", "extraction", "no-such-task"};
  const std::vector<std::string> models = {"", "auto", "cloud-large", "cloud-small", "edge-llm"};
  const std::vector<std::string> intents = {"opening_hours", "refund", "shipping"};
  const std::vector<std::string> sessions = {"", "s-a", "s-b", "s-c"};
  const std::vector<std::vector<std::string>> pool_sets = {
      {"cloud-small", "cloud-large"}, {"cloud-small"}, {"cloud-large"}, {}};

  Clock::time_point now = now_;
  RouterRuntime runtime(default_policy());
  int seen_edge_intent = 0, seen_edge_llm = 0, seen_refuse = 0;
  int seen_pii_outside_messages = 0, seen_uncheckable = 0, seen_non_text_refused = 0;
  for (int i = 0; i < 2000; ++i) {
    now += std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 20'000)(random));

    // Thresholds: random default band and a random band for one intent.
    ThresholdsFile file;
    file.version = "thr-prop-" + std::to_string(i);
    const double low = uniform(0, 1);
    file.default_band = Band{uniform(low, kEdgeNever), low};
    const double intent_low = uniform(0, 1);
    file.intents[pick(intents)] = Band{uniform(intent_low, kEdgeNever), intent_low};
    RouterPolicy policy = default_policy();
    auto thresholds = Thresholds::create(file);
    ASSERT_TRUE(thresholds.ok()) << thresholds.error().message;
    policy.thresholds = std::move(*thresholds);
    policy.version = "prop-" + std::to_string(i);

    // Load: the pools' P90 wanders from fast to far over budget.
    for (int sample = std::uniform_int_distribution<int>(0, 6)(random); sample > 0; --sample) {
      runtime.observe_cloud_latency(pick(std::vector<std::string>{"cloud-small", "cloud-large"}),
                                    uniform(5, 20'000), now);
    }
    if (chance(0.2)) runtime.observe_edge_llm(uniform(1, 500), 64, uniform(10, 5000));

    // Sessions with history, some of it complex.
    const std::string session = pick(sessions);
    if (!session.empty() && chance(0.5)) {
      runtime.sessions().record(session, 5, "cloud-large", now);
      runtime.sessions().record(session, 5, "cloud-large", now);
    }

    // The conversation: 1-4 messages, PII in any one of them, extras sprinkled on top.
    const int message_count = std::uniform_int_distribution<int>(1, 4)(random);
    std::vector<std::string> texts(static_cast<std::size_t>(message_count), "hello there");
    if (chance(0.5)) texts.back() = kSimpleText;
    if (chance(0.4)) texts.back() = kAnalyticalText;
    if (chance(0.5)) texts.back() += " " + pick(sensitive) + " ";
    if (chance(0.3)) texts.front() += " " + pick(sensitive);
    const std::size_t pii_at =
        std::uniform_int_distribution<std::size_t>(0, texts.size() - 1)(random);
    const std::string item = pick(pii);
    // Where the PII sits: 0 a message's text, 1 split across two of its content parts, 2-10
    // only outside the messages' text (tool call arguments, user, metadata, a tool's description
    // or name, prediction, a message's name), 11 nowhere: a part the scan cannot read instead.
    const int place = std::uniform_int_distribution<int>(0, 11)(random);
    if (place == 0)
      texts[pii_at] += (chance(0.5) ? " " : "，") + item + (chance(0.5) ? " ok" : "。");
    bool has_pii = place != 11;
    if (chance(0.2)) {
      texts[0] += " also " + pick(pii) + " ";
      has_pii = true;
    }
    const bool has_non_text = place == 11 || chance(0.15);

    json messages = json::array();
    for (std::size_t m = 0; m < texts.size(); ++m) {
      const bool last = m + 1 == texts.size();
      json message = {{"role", last || m % 2 == 0 ? "user" : "assistant"}, {"content", texts[m]}};
      if (chance(0.3) || (place == 1 && m == pii_at)) {
        json parts = json::array({text_part(texts[m])});
        if (place == 1 && m == pii_at) {  // "…138" + "12345678 …": split anywhere inside
          const std::size_t cut =
              std::uniform_int_distribution<std::size_t>(1, item.size() - 1)(random);
          parts.push_back(text_part(" " + item.substr(0, cut)));
          parts.push_back(text_part(item.substr(cut) + " ok"));
        }
        message["content"] = std::move(parts);
      }
      if (place == 10 && m == pii_at) message["name"] = item;
      messages.push_back(std::move(message));
    }
    if (has_non_text) {
      json& target = messages[pii_at];
      if (!target["content"].is_array())
        target["content"] = json::array({text_part(texts[pii_at])});
      target["content"].push_back(pick(std::vector<json>{kImagePart, kAudioPart, kFilePart}));
    }
    json body = {{"model", "auto"}, {"messages", std::move(messages)}};
    const json tool = {{"type", "function"},
                       {"function",
                        {{"name", place == 6 ? "notify_" + item : "notify"},
                         {"description", place == 5 ? "notifies " + item : "notifies someone"},
                         {"parameters", {{"type", "object"}, {"properties", json::object()}}}}}};
    if (place == 5 || place == 6 || chance(0.3)) body["tools"] = json::array({tool});
    if (place == 2) {
      const json call = {
          {"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "lookup"}, {"arguments", json{{"who", item}}.dump()}}}};
      const json assistant = {
          {"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}};
      body["messages"].insert(body["messages"].begin(), assistant);
    }
    if (place == 3) body["user"] = item;
    if (place == 4) body["metadata"] = {{"contact", item}};
    if (place == 7) body["metadata"] = {{item, "contact"}};
    if (place == 8) body["prediction"] = {{"type", "content"}, {"content", "draft to " + item}};
    if (place == 9)
      body["functions"] = json::array({{{"name", "f"}, {"description", "to " + item}}});
    if (chance(0.3)) body["metadata"]["order"] = "order 2023112912345678901";  // near-miss noise
    policy.pii_non_text_parts = chance(0.3) ? NonTextParts::kRefuse : NonTextParts::kPin;

    const ChatRequest request = parsed(body);
    if (place >= 2 && place <= 10 && !has_pii_in_texts(request, default_policy())) {
      ++seen_pii_outside_messages;
    }
    RouteInput input = route_input(request, Budget::after(Millis(0)));
    input.model = pick(models);
    input.task_type = pick(tasks);
    input.session_id = session;
    input.budget = Budget::after(Millis(pick(std::vector<std::int64_t>{
        -5'000, 0, 1, 50, 900, 2'000, 60'000,
        std::uniform_int_distribution<std::int64_t>(-100, 30'000)(random)})));
    input.input_tokens = std::uniform_int_distribution<int>(0, 2000)(random);
    input.requested_output_tokens = pick(std::vector<int>{0, 64, 256, 4096});
    input.wants_structured_output = chance(0.3);
    input.has_tools = chance(0.3);
    input.offline = chance(0.2);  // offline mode must not loosen the PII pin
    input.llm_available = chance(0.5);
    input.default_pool = pick(std::vector<std::string>{"cloud-small", "cloud-large"});
    input.pools = pick(pool_sets);

    edge::IntentPrediction prediction;
    const int prediction_kind = std::uniform_int_distribution<int>(0, 3)(random);
    if (prediction_kind == 1) prediction = out_of_scope();
    if (prediction_kind >= 2) {
      prediction = in_scope(uniform(0, 1), pick(intents), chance(0.9) ? "a canned answer" : "");
    }
    input.prediction = prediction_kind == 0 ? nullptr : &prediction;

    const Decision decision = decide(input, policy, runtime, now);
    SCOPED_TRACE("case " + std::to_string(i) + ": " + decision.figures.dump());
    ASSERT_TRUE(to_string(decision.route) == "edge" || to_string(decision.route) == "refuse") << to_string(decision.route);
    ASSERT_EQ(to_string(decision.fallback_type), "");
    ASSERT_EQ(decision.figures.contains("pii"), has_pii);
    if (has_pii) {
      ASSERT_FALSE(decision.figures["pii"].empty());
    }
    ASSERT_EQ(decision.figures.contains("non_text_parts"), has_non_text);
    if (has_non_text) {
      ASSERT_FALSE(decision.figures["non_text_parts"].empty());
    }
    ASSERT_EQ(decision.figures["policy"], policy.version);
    // The plan the chain walks never reaches a cloud (offline or not) and ends in the safe reply.
    ASSERT_FALSE(decision.plan.includes_cloud()) << to_json(decision.plan).dump();
    ASSERT_FALSE(decision.plan.steps.empty());
    ASSERT_EQ(decision.plan.steps.back().source, Source::safe_reply);
    if (has_non_text && policy.pii_non_text_parts == NonTextParts::kRefuse) {
      ASSERT_EQ(to_string(decision.route), "refuse");
      ASSERT_EQ(to_string(decision.reason), "non_text_refused");
      ++seen_non_text_refused;
      continue;
    }
    ASSERT_EQ(to_string(decision.reason), has_pii ? "pii_pin" : "pii_uncheckable");
    if (!has_pii) ++seen_uncheckable;

    // Which edge engine, exactly as the contract says.
    const Band band =
        policy.thresholds.band(input.task_type, input.prediction ? prediction.intent : "");
    const bool intent_can_answer = input.prediction != nullptr && !prediction.is_oos &&
                                   !prediction.answer.empty() && prediction.confidence >= band.high;
    if (intent_can_answer) {
      ASSERT_EQ(to_string(decision.edge_engine), "intent");
      ++seen_edge_intent;
    } else if (input.llm_available) {
      ASSERT_EQ(to_string(decision.edge_engine), "llm");
      ++seen_edge_llm;
    } else {
      ASSERT_EQ(to_string(decision.route), "refuse");
      ++seen_refuse;
    }
  }
  // The generator reached every outcome.
  EXPECT_GT(seen_edge_intent, 50);
  EXPECT_GT(seen_edge_llm, 50);
  EXPECT_GT(seen_refuse, 50);
  EXPECT_GT(seen_pii_outside_messages, 500);
  EXPECT_GT(seen_uncheckable, 50);
  EXPECT_GT(seen_non_text_refused, 50);
}

// ---- 1. hard constraints: sensitive signals ----

TEST_F(DecideTest, SensitiveSignalGoesToItsTarget) {
  struct Case {
    std::string text;
    std::string route;
    std::string rule;
  };
  for (const Case& c :
       std::vector<Case>{{"你好，我要转人工", "human", "human_handoff"},
                         {"I want to talk to a human now", "human", "human_handoff"},
                         {"我要投诉你们", "human", "complaint"},
                         {"my card was stolen yesterday", "cloud-large", "fraud_security"},
                         {"信用卡被盗刷了", "cloud-large", "fraud_security"}}) {
    SCOPED_TRACE(c.text);
    const std::vector<std::string> texts = {c.text};
    const Decision decision = run(input_for(texts));
    expect_route(decision, c.route, "sensitive_signal");
    EXPECT_EQ(decision.figures.value("signal", ""), c.rule);
  }
}

TEST_F(DecideTest, SensitiveSignalBeatsPinsConfidenceCapabilityAndDeadline) {
  const std::vector<std::string> texts = {"请帮我转人工"};
  const std::vector<std::string> fraud = {"my card was stolen"};
  const edge::IntentPrediction confident = in_scope(0.99);
  for (const std::string model : {"cloud-small", "cloud-large", "edge-llm"}) {
    SCOPED_TRACE(model);
    RouteInput input = input_for(texts);
    input.model = model;
    input.prediction = &confident;
    input.llm_available = true;
    input.task_type = "code";
    input.has_tools = true;
    input.budget = Budget::after(Millis(0));
    expect_route(run(input), "human", "sensitive_signal");

    RouteInput fraud_input = input_for(fraud);
    fraud_input.model = model;
    fraud_input.prediction = &confident;
    expect_route(run(fraud_input), "cloud-large", "sensitive_signal");
  }
}

TEST_F(DecideTest, SensitiveSignalReadsOnlyTheLastUserText) {
  // An old complaint does not hand every later turn to a human.
  const std::vector<std::string> texts = {"我要投诉", "算了，没事了", kSimpleText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction confident = in_scope(0.95);
  input.prediction = &confident;
  expect_route(run(input), "edge", "high_confidence");
}

TEST_F(DecideTest, PiiBeatsSensitiveSignal) {
  for (const std::string& text :
       {"转人工 " + std::string(kMobile), "my card " + valid_card() + " was stolen"}) {
    SCOPED_TRACE(text);
    const std::vector<std::string> texts = {text};
    RouteInput input = input_for(texts);
    input.llm_available = true;
    const Decision decision = run(input);
    expect_route(decision, "edge", "pii_pin");
    EXPECT_FALSE(decision.figures.contains("signal"));
  }
}

TEST_F(DecideTest, SensitiveRulesFromThePolicyReplaceTheDefaults) {
  const auto policy = policy_from(
      "sensitive:\n"
      "  - {name: zebra, keywords: [zebra], target: human}\n");
  const std::vector<std::string> zebra = {"a zebra!"};
  expect_route(run(input_for(zebra), *policy), "human", "sensitive_signal");
  const std::vector<std::string> handoff = {"转人工"};
  expect_route(run(input_for(handoff), *policy), "cloud-small", "default_pool");
}

// ---- 2. pins ----

TEST_F(DecideTest, PoolNameAsModelIsAPin) {
  const std::vector<std::string> texts = {kSimpleText};
  const edge::IntentPrediction confident = in_scope(0.99);
  for (const std::string pool : {"cloud-large", "cloud-small"}) {
    RouteInput input = input_for(texts);
    input.model = pool;
    input.prediction = &confident;
    expect_route(run(input), pool, "model_pinned");
  }
}

TEST_F(DecideTest, EdgeLlmAsModelIsAPin) {
  const std::vector<std::string> texts = {kAnalyticalText};
  RouteInput input = input_for(texts);
  input.model = "edge-llm";
  input.llm_available = true;
  const Decision decision = run(input);
  expect_route(decision, "edge", "model_pinned");
  EXPECT_EQ(to_string(decision.edge_engine), "llm");
}

TEST_F(DecideTest, PinBeatsCapabilityAndDeadline) {
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.model = "cloud-small";
  input.task_type = "code";
  input.has_tools = true;
  input.budget = Budget::after(Millis(-1));
  expect_route(run(input), "cloud-small", "model_pinned");
}

TEST_F(DecideTest, PoolNameNotConfiguredIsNotAPin) {
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.model = "cloud-large";
  input.pools = {"cloud-small"};
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  expect_route(run(input), "edge", "high_confidence");

  input.prediction = nullptr;
  expect_route(run(input), "cloud-small", "default_pool");

  for (const std::string model : {"auto", "gpt-4o", ""}) {
    input.model = model;
    input.pools = {"cloud-small", "cloud-large"};
    expect_route(run(input), "cloud-small", "default_pool");
  }
}

// ---- 3. capability ----

TEST_F(DecideTest, TaskTheEdgeMayNotServeIsACapabilityMiss) {
  const edge::IntentPrediction confident = in_scope(0.99);
  const std::vector<std::string> simple = {kSimpleText};
  RouteInput input = input_for(simple);
  input.task_type = "code";
  input.prediction = &confident;
  Decision decision = run(input);
  expect_route(decision, "cloud-small", "capability_miss", "");
  EXPECT_EQ(decision.figures.value("capability", ""), "edge_not_allowed");

  const std::vector<std::string> complex = {kAnalyticalText};
  RouteInput complex_input = input_for(complex);
  complex_input.task_type = "code";
  decision = run(complex_input);
  expect_route(decision, "cloud-large", "capability_miss", "");
  EXPECT_EQ(decision.figures.value("complexity", 0), 5);
}

TEST_F(DecideTest, ToolsStructuredOutputAndLengthAreCapabilityMisses) {
  const edge::IntentPrediction confident = in_scope(0.99);
  const std::vector<std::string> texts = {kSimpleText};

  RouteInput tools = input_for(texts);
  tools.prediction = &confident;
  tools.has_tools = true;
  Decision decision = run(tools);
  expect_route(decision, "cloud-small", "capability_miss");
  EXPECT_EQ(decision.figures.value("capability", ""), "tools");

  RouteInput long_input = input_for(texts);
  long_input.prediction = &confident;
  long_input.input_tokens = 513;  // faq: max_input_tokens 512
  decision = run(long_input);
  expect_route(decision, "cloud-small", "capability_miss");
  EXPECT_EQ(decision.figures.value("capability", ""), "input_too_long");
  long_input.input_tokens = 512;
  expect_route(run(long_input), "edge", "high_confidence");

  RouteInput structured = input_for(texts);
  structured.prediction = &confident;
  structured.task_type = "extraction";
  structured.wants_structured_output = true;
  decision = run(structured);
  expect_route(decision, "cloud-small", "capability_miss");
  EXPECT_EQ(decision.figures.value("capability", ""), "structured_output");
}

TEST_F(DecideTest, UnknownTaskTypeUsesTheDefaultRowAndSaysSo) {
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.task_type = "astrology";
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  Decision decision = run(input);
  expect_route(decision, "edge", "high_confidence");
  EXPECT_EQ(decision.figures.value("task_type_unknown", false), true);

  input.task_type = "faq";
  decision = run(input);
  EXPECT_FALSE(decision.figures.contains("task_type_unknown"));
}

TEST_F(DecideTest, CapabilitiesFromThePolicyOverrideTheDefaults) {
  const auto policy = policy_from(
      "capabilities:\n"
      "  code: {edge: yes}\n"
      "  faq: {edge: no}\n");
  const edge::IntentPrediction confident = in_scope(0.99);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.prediction = &confident;
  input.task_type = "code";
  expect_route(run(input, *policy), "edge", "high_confidence");
  input.task_type = "faq";
  expect_route(run(input, *policy), "cloud-small", "capability_miss");
}

TEST_F(DecideTest, CapabilityBeatsDeadline) {
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.task_type = "reasoning";
  input.budget = Budget::after(Millis(0));
  expect_route(run(input), "cloud-small", "capability_miss");
}

// ---- 4. deadline ----

TEST_F(DecideTest, SpentBudgetIsRefusedAtOnce) {
  const std::vector<std::string> texts = {kAnalyticalText};
  const edge::IntentPrediction confident = in_scope(0.99);
  for (std::int64_t remaining : {std::int64_t{0}, std::int64_t{-1}, std::int64_t{-60'000}}) {
    RouteInput input = input_for(texts);
    input.prediction = &confident;
    input.budget = Budget::after(Millis(remaining));
    const Decision decision = run(input);
    expect_route(decision, "refuse", "deadline_exceeded");
    EXPECT_EQ(decision.figures.value("remaining_ms", std::int64_t{1}), 0) << "a spent budget reads 0, never negative";
  }
  const std::vector<std::string> simple = {kSimpleText};
  RouteInput input = input_for(simple);
  input.prediction = &confident;
  input.budget = Budget::after(Millis(1));
  expect_route(run(input), "edge", "high_confidence");
}

// ---- 5. complexity ----

TEST_F(DecideTest, ComplexTextGoesToTheLargeModelWhateverTheConfidence) {
  const std::vector<std::string> texts = {kAnalyticalText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  Decision decision = run(input);
  expect_route(decision, "cloud-large", "complexity_high");
  EXPECT_EQ(decision.figures.value("complexity", 0), 5);

  input.prediction = nullptr;
  expect_route(run(input), "cloud-large", "complexity_high");
}

TEST_F(DecideTest, ComplexityThresholdComesFromThePolicy) {
  const auto never = policy_from("complexity: {cloud_large_at: 6}\n");
  const std::vector<std::string> texts = {kAnalyticalText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  expect_route(run(input, *never), "edge", "high_confidence");

  const auto eager = policy_from("complexity: {cloud_large_at: 2}\n");
  const std::vector<std::string> fairly_simple = {kFairlySimpleText};
  RouteInput fairly = input_for(fairly_simple);
  fairly.prediction = &confident;
  expect_route(run(fairly, *eager), "cloud-large", "complexity_high");
}

// ---- 6. confidence bands ----

TEST_F(DecideTest, ConfidenceBandsChooseTheRoute) {
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  struct Case {
    double confidence;
    std::string route, reason, fallback;
  };
  for (const Case& c : std::vector<Case>{{0.85, "edge", "high_confidence", ""},
                                         {0.99, "edge", "high_confidence", ""},
                                         {0.849, "cloud-small", "middle_band", "quality"},
                                         {0.5, "cloud-small", "middle_band", "quality"},
                                         // Doubt is not difficulty: cloud-small (issue 10).
                                         {0.499, "cloud-small", "low_confidence", "quality"},
                                         {0.0, "cloud-small", "low_confidence", "quality"}}) {
    SCOPED_TRACE(c.confidence);
    edge::IntentPrediction prediction = in_scope(c.confidence);
    prediction.in_scope = 0.95;  // the two factors travel with the product the bands gate on
    prediction.intent_confidence = std::min(1.0, c.confidence / 0.95);
    input.prediction = &prediction;
    const Decision decision = run(input);
    expect_route(decision, c.route, c.reason, c.fallback);
    EXPECT_EQ(to_string(decision.edge_engine), c.route == "edge" ? "intent" : "");
    EXPECT_EQ(decision.intent, "opening_hours");
    EXPECT_EQ(decision.confidence, c.confidence);
    EXPECT_EQ(decision.in_scope, 0.95);
    EXPECT_EQ(decision.intent_confidence, prediction.intent_confidence);
    EXPECT_EQ(decision.figures.value("band_high", 0.0), 0.85);
    EXPECT_EQ(decision.figures.value("band_low", 0.0), 0.5);
  }
}

TEST_F(DecideTest, HighConfidenceWithoutACannedAnswerIsMiddleBand) {
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction prediction = in_scope(0.99, "opening_hours", "");
  input.prediction = &prediction;
  expect_route(run(input), "cloud-small", "middle_band", "quality");
}

TEST_F(DecideTest, OutOfScopeAndNoPrediction) {
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction oos = out_of_scope();
  input.prediction = &oos;
  expect_route(run(input), "cloud-small", "out_of_scope", "quality");

  input.prediction = nullptr;
  Decision decision = run(input);
  expect_route(decision, "cloud-small", "default_pool");
  EXPECT_FALSE(decision.figures.contains("band_high"));
  input.default_pool = "cloud-large";
  expect_route(run(input), "cloud-large", "default_pool");
}

TEST_F(DecideTest, BandRoutesComeFromThePolicy) {
  const auto policy = policy_from(
      "confidence:\n"
      "  default_band: {high: 0.7, low: 0.6}\n"
      "  middle_band_route: cloud-large\n"
      "  low_band_route: cloud-small\n"
      "  out_of_scope_route: human\n");
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction high = in_scope(0.7), middle = in_scope(0.65), low = in_scope(0.59);
  const edge::IntentPrediction oos = out_of_scope();
  input.prediction = &high;
  expect_route(run(input, *policy), "edge", "high_confidence");
  input.prediction = &middle;
  expect_route(run(input, *policy), "cloud-large", "middle_band", "quality");
  input.prediction = &low;
  expect_route(run(input, *policy), "cloud-small", "low_confidence", "quality");
  input.prediction = &oos;
  expect_route(run(input, *policy), "human", "out_of_scope", "quality");
}

TEST_F(DecideTest, EdgeVerifyServesTheMiddleBandFromTheEdgePendingACloudCheck) {
  const auto policy = policy_from(
      "confidence:\n"
      "  default_band: {high: 0.7, low: 0.6}\n"
      "  middle_band_route: edge_verify\n");
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction middle = in_scope(0.65), high = in_scope(0.9);
  input.prediction = &middle;
  Decision decision = run(input, *policy);
  expect_route(decision, "edge", "middle_band_verify");
  EXPECT_EQ(to_string(decision.edge_engine), "intent");
  EXPECT_EQ(decision.figures["verify_pool"], "cloud-small");
  input.prediction = &high;
  expect_route(run(input, *policy), "edge", "high_confidence");  // no check above the band
  input.prediction = &middle;
  input.pools = {"cloud-large"};  // no judge configured: the middle band goes to the cloud
  expect_route(run(input, *policy), "cloud-small", "middle_band", "quality");
  EXPECT_FALSE(parse_router_policy("confidence: {middle_band_route: edge_check}\n", "p.yaml", "").ok());
}

class DecideThresholdsFileTest : public DecideTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hengshi_decide_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(DecideThresholdsFileTest, PerIntentBandOverridesTheDefault) {
  ThresholdsFile file;
  file.version = "thr-decide-1";
  file.default_band = Band{0.9, 0.5};
  file.intents = {{"opening_hours", Band{0.6, 0.4}}};
  file.task_intents = {{"chitchat/opening_hours", Band{kEdgeNever, 0.2}}};
  const std::string path = (dir_ / "thresholds.json").string();
  ASSERT_TRUE(write_thresholds_file(file, path).ok());
  const auto policy = policy_from("", path);
  ASSERT_NE(policy, nullptr);
  EXPECT_NE(policy->version.find("+thr-decide-1"), std::string::npos) << policy->version;

  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  const edge::IntentPrediction hours = in_scope(0.7, "opening_hours");
  const edge::IntentPrediction refund = in_scope(0.7, "refund");
  input.prediction = &hours;
  Decision decision = run(input, *policy);
  expect_route(decision, "edge", "high_confidence");
  EXPECT_EQ(decision.figures.value("band_high", 0.0), 0.6);

  input.prediction = &refund;  // the default band of the file, not the built-in one
  decision = run(input, *policy);
  expect_route(decision, "cloud-small", "middle_band", "quality");
  EXPECT_EQ(decision.figures.value("band_high", 0.0), 0.9);

  // task/intent beats intent: this group never goes to the edge.
  input.prediction = &hours;
  input.task_type = "chitchat";
  const edge::IntentPrediction certain = in_scope(1.0, "opening_hours");
  input.prediction = &certain;
  expect_route(run(input, *policy), "cloud-small", "middle_band", "quality");
}

// ---- 7. latency gate ----

class DecideLatencyTest : public DecideTest {
 protected:
  void observe(const std::string& pool, double latency_ms, int samples = 100) {
    for (int i = 0; i < samples; ++i) runtime_.observe_cloud_latency(pool, latency_ms, now_);
  }
};

TEST_F(DecideLatencyTest, SlowCloudSendsAMiddleBandIntentAnswerToTheEdge) {
  observe("cloud-small", 5000);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.budget = Budget::after(Millis(1000));
  const edge::IntentPrediction middle = in_scope(0.7);
  input.prediction = &middle;
  const Decision decision = run(input);
  expect_route(decision, "edge", "latency_pressure", "timeout");
  EXPECT_EQ(to_string(decision.edge_engine), "intent");
  EXPECT_EQ(decision.figures.value("edge_eta_ms", 0.0), 1.0);

  // The same request with a budget the cloud fits stays in the middle band.
  input.budget = Budget::after(Millis(60'000));
  expect_route(run(input), "cloud-small", "middle_band", "quality");

  // Below low the intent answer is not good enough even under pressure.
  const edge::IntentPrediction low = in_scope(0.3);
  input.prediction = &low;
  input.budget = Budget::after(Millis(1000));
  observe("cloud-large", 5000);
  const Decision low_decision = run(input);
  EXPECT_EQ(to_string(low_decision.route), "cloud-small");  // the low band's pool, kept
  EXPECT_EQ(to_string(low_decision.reason), "latency_pressure");
  EXPECT_NE(to_string(low_decision.route), "edge");
}

TEST_F(DecideLatencyTest, SlowCloudFallsBackToAFastEdgeLlm) {
  observe("cloud-small", 5000);
  observe("cloud-large", 5000);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.budget = Budget::after(Millis(1000));
  input.llm_available = true;
  // Priors: 200 ms + 128 tokens at 20 tokens/s = 6.6 s: does not fit.
  Decision decision = run(input);
  EXPECT_TRUE(decision.figures.value("nothing_fits", false)) << decision.figures.dump();
  // Measured: about 50 ms + 128 tokens at ~1000 tokens/s.
  for (int i = 0; i < 100; ++i) runtime_.observe_edge_llm(50, 100, 100);
  decision = run(input);
  expect_route(decision, "edge", "latency_pressure", "timeout");
  EXPECT_EQ(to_string(decision.edge_engine), "llm");
  EXPECT_LT(decision.figures.value("edge_eta_ms", 1e9), 1000);
}

TEST_F(DecideLatencyTest, SlowPoolFallsBackToTheOtherPoolWhenItFits) {
  observe("cloud-small", 5000);
  observe("cloud-large", 500);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);  // no intent engine, no LLM: default pool cloud-small
  input.budget = Budget::after(Millis(1000));
  const Decision decision = run(input);
  expect_route(decision, "cloud-large", "latency_pressure", "timeout");
  EXPECT_NEAR(decision.figures.value("p90_ms", 0.0), 500, 500 * 0.05);

  // The other pool must be configured to be taken.
  input.pools = {"cloud-small"};
  const Decision only_small = run(input);
  expect_route(only_small, "cloud-small", "latency_pressure");
  EXPECT_TRUE(only_small.figures.value("nothing_fits", false));
}

TEST_F(DecideLatencyTest, NothingFitsKeepsTheChoice) {
  observe("cloud-small", 5000);
  observe("cloud-large", 5000);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.budget = Budget::after(Millis(1000));
  const edge::IntentPrediction low = in_scope(0.2);
  input.prediction = &low;
  const Decision decision = run(input);
  // The low-band choice stands, still a quality fallback; only the reason says why it is late.
  expect_route(decision, "cloud-small", "latency_pressure", "quality");
  EXPECT_TRUE(decision.figures.value("nothing_fits", false));
  EXPECT_NEAR(decision.figures.value("p90_ms", 0.0), 5000, 5000 * 0.05);
}

TEST_F(DecideLatencyTest, PriorsApplyBeforeAnySample) {
  // cloud-small's prior P90 is 1500 ms, cloud-large's 3000 ms.
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.budget = Budget::after(Millis(1600));
  Decision decision = run(input);
  expect_route(decision, "cloud-small", "default_pool");
  EXPECT_EQ(decision.figures.value("p90_ms", 0.0), 1500);
  input.budget = Budget::after(Millis(1400));
  decision = run(input);
  expect_route(decision, "cloud-small", "latency_pressure");
  EXPECT_TRUE(decision.figures.value("nothing_fits", false));
}

TEST_F(DecideLatencyTest, OldSamplesLeaveTheWindow) {
  observe("cloud-small", 5000);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.budget = Budget::after(Millis(2000));
  expect_route(run(input), "cloud-small", "latency_pressure");
  now_ += std::chrono::minutes(6);  // back to the 1500 ms prior
  expect_route(run(input), "cloud-small", "default_pool");
}

// ---- sessions ----

TEST_F(DecideTest, ComplexSessionCarriesASimpleTurnToTheLargeModel) {
  const std::vector<std::string> complex = {kAnalyticalText};
  RouteInput complex_input = input_for(complex);
  complex_input.session_id = "s-1";
  for (int turn = 1; turn <= 2; ++turn) {
    const Decision decision = run(complex_input);
    expect_route(decision, "cloud-large", "complexity_high");
    EXPECT_EQ(decision.figures.value("session_cloud_calls", 0), turn);
  }

  // Scores 1 alone, but the session's recent turns average 5: it stays on cloud-large.
  const std::vector<std::string> simple = {kSimpleText};
  RouteInput input = input_for(simple);
  input.session_id = "s-1";
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  const Decision decision = run(input);
  expect_route(decision, "cloud-large", "session_sticky");
  EXPECT_EQ(decision.figures.value("complexity", 0), 1);
  EXPECT_DOUBLE_EQ(decision.figures.value("complexity_session_mean", 0.0), 5.0);
  EXPECT_EQ(decision.figures.value("session_cloud_calls", 0), 3);

  // Another session, or none, is not affected.
  input.session_id = "s-2";
  expect_route(run(input), "edge", "high_confidence");
  input.session_id = "";
  const Decision anonymous = run(input);
  expect_route(anonymous, "edge", "high_confidence");
  EXPECT_FALSE(anonymous.figures.contains("session_cloud_calls"));
}

TEST_F(DecideTest, SimpleTurnsSlideTheSessionBackToTheEdge) {
  for (int i = 0; i < 2; ++i) runtime_.sessions().record("s-1", 5, "cloud-large", now_);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.session_id = "s-1";
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  // Window [5, 5]: sticky. It records this turn's 1.
  expect_route(run(input), "cloud-large", "session_sticky");
  // Window [5, 5, 1]: mean 11/3 is below 4, so the next simple turn is free again.
  const Decision decision = run(input);
  expect_route(decision, "edge", "high_confidence");
  EXPECT_NEAR(decision.figures.value("complexity_session_mean", 0.0), 11.0 / 3, 1e-9);
  EXPECT_EQ(decision.figures.value("session_cloud_calls", 0), 3);  // this turn was not cloud
}

TEST_F(DecideTest, ComplexTurnInASimpleSessionIsStillComplex) {
  for (int i = 0; i < 2; ++i) runtime_.sessions().record("s-1", 1, "edge", now_);
  const std::vector<std::string> texts = {kAnalyticalText};
  RouteInput input = input_for(texts);
  input.session_id = "s-1";
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  const Decision decision = run(input);
  expect_route(decision, "cloud-large", "complexity_high");
  EXPECT_DOUBLE_EQ(decision.figures.value("complexity_session_mean", 0.0), 1.0);
  EXPECT_EQ(decision.figures.value("session_cloud_calls", 0), 1);
}

TEST_F(DecideTest, StickySessionStillPassesTheLatencyGate) {
  for (int i = 0; i < 2; ++i) runtime_.sessions().record("s-1", 5, "cloud-large", now_);
  for (int i = 0; i < 100; ++i) runtime_.observe_cloud_latency("cloud-large", 5000, now_);
  const std::vector<std::string> texts = {kSimpleText};
  RouteInput input = input_for(texts);
  input.session_id = "s-1";
  input.budget = Budget::after(Millis(1000));
  const edge::IntentPrediction middle = in_scope(0.7);
  input.prediction = &middle;
  const Decision decision = run(input);
  expect_route(decision, "edge", "latency_pressure", "timeout");
  EXPECT_EQ(to_string(decision.edge_engine), "intent");
}

TEST_F(DecideTest, SessionsOffInThePolicy) {
  const auto policy = policy_from("sessions: {enabled: false}\n");
  for (int i = 0; i < 2; ++i) runtime_.sessions().record("s-1", 5, "cloud-large", now_);
  const std::vector<std::string> texts = {kFairlySimpleText};
  RouteInput input = input_for(texts);
  input.session_id = "s-1";
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  const Decision decision = run(input, *policy);
  expect_route(decision, "edge", "high_confidence");
  EXPECT_FALSE(decision.figures.contains("session_cloud_calls"));
}

TEST_F(DecideTest, ExpiredSessionIsForgotten) {
  for (int i = 0; i < 2; ++i) runtime_.sessions().record("s-1", 5, "cloud-large", now_);
  now_ += std::chrono::seconds(default_policy().sessions.ttl_s);
  const std::vector<std::string> texts = {kFairlySimpleText};
  RouteInput input = input_for(texts);
  input.session_id = "s-1";
  const edge::IntentPrediction confident = in_scope(0.99);
  input.prediction = &confident;
  const Decision decision = run(input);
  expect_route(decision, "edge", "high_confidence");
  EXPECT_EQ(decision.figures.value("session_cloud_calls", -1), 0);
}

// ---- route_input ----

TEST(RouteInputTest, ReadsTheRequest) {
  ChatRequest request;
  request.model = "auto";
  request.messages.push_back({"system", "be brief"});
  request.messages.push_back({"user", "first " + std::string(kMobile)});
  request.messages.push_back({"assistant", "noted"});
  request.messages.push_back({"user", kSimpleText});
  request.hengshi.task_type = "faq";
  request.hengshi.session_id = "s-9";
  request.max_tokens = 64;
  request.set_body(nlohmann::json{{"response_format", {{"type", "json_schema"}}},
                                   {"tools", nlohmann::json::array({{{"type", "function"}}})}});
  request.response_format = "json_schema";  // parse_chat_request reads it from the body
  const Budget budget = Budget::after(Millis(1234));
  const RouteInput input = route_input(request, budget);
  EXPECT_EQ(input.model, "auto");
  ASSERT_EQ(input.texts.size(), 4u);
  EXPECT_EQ(input.texts[1], request.messages[1].text);
  EXPECT_EQ(input.last_user_text, kSimpleText);
  EXPECT_EQ(input.turns, 4);
  EXPECT_EQ(input.task_type, "faq");
  EXPECT_EQ(input.session_id, "s-9");
  // The same deadline, compared as a point: remaining() reads the clock, which moves.
  EXPECT_EQ(input.budget.deadline().at(), budget.deadline().at());
  EXPECT_EQ(input.requested_output_tokens, 64);
  EXPECT_GT(input.input_tokens, 4 * 4);
  EXPECT_TRUE(input.wants_structured_output);
  EXPECT_TRUE(input.has_tools);

  // The earlier message's PII is seen through route_input too.
  RouterRuntime runtime(default_policy());
  RouteInput routed = input;
  routed.pools = {"cloud-small", "cloud-large"};
  EXPECT_EQ(to_string(decide(routed, default_policy(), runtime).reason), "pii_pin");
}

TEST(RouteInputTest, CollectsEveryForwardedStringOnce) {
  const ChatRequest request = parsed(
      {{"model", "auto"},
       {"messages", json::array({user_message("hello one"),
                                 user_message(json::array(
                                     {text_part("part a"), text_part("part b"), kImagePart}))})},
       {"user", "u-1"},
       {"metadata", {{"k", "v"}, {"n", 7}}},
       {"max_tokens", 9}});
  const RouteInput input = route_input(request, Budget::after(Millis(1)));
  const auto forwarded = [&](std::string_view text) {
    return std::count(input.forwarded_strings.begin(), input.forwarded_strings.end(), text);
  };
  for (const std::string_view text :
       {"u-1", "k", "v", "user", "metadata", "messages", "role", "content", "image_url",
        "https://example.com/a.png", "auto"}) {
    EXPECT_GE(forwarded(text), 1) << text;
  }
  // The message text is scanned through `texts`, not a second time.
  for (const std::string_view text : {"hello one", "part a", "part b"})
    EXPECT_EQ(forwarded(text), 0) << text;
  EXPECT_EQ(input.texts[1], "part a\npart b");
  EXPECT_EQ(input.derived_strings, (std::vector<std::string>{"7", "part apart b"}));
  EXPECT_EQ(input.non_text_kinds, std::vector<std::string>{"image_url"});
}

}  // namespace
}  // namespace hengshi::router
