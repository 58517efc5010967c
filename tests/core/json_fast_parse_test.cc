#include "core/json_fast_parse.h"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <vector>

namespace hengshi {
namespace {

using nlohmann::json;

// The same value and the same number kinds as nlohmann's own parser gives: the router, the cache
// key and the upstream body read the DOM, so a body must not change meaning with the parser.
// The parse a request keeps, and the DOM built from it on demand.
std::optional<json> parse_json_fast(const std::string& text, int max_depth, TextBeyondDom* beyond = nullptr) {
  simdjson::dom::document document;
  if (!parse_json_document(text, max_depth, document, beyond)) return std::nullopt;
  return to_nlohmann(document.root());
}

void expect_as_nlohmann(const std::string& text) {
  const json expected = json::parse(text);
  const std::optional<json> fast = parse_json_fast(text, 64);
  ASSERT_TRUE(fast.has_value()) << text;
  EXPECT_EQ(*fast, expected) << text;
  EXPECT_EQ(fast->dump(), expected.dump()) << text;
  // Kinds, recursively: dump() prints 5 for both a signed and an unsigned 5.
  std::vector<std::pair<const json*, const json*>> pending = {{&*fast, &expected}};
  while (!pending.empty()) {
    auto [got, want] = pending.back();
    pending.pop_back();
    ASSERT_EQ(got->type(), want->type()) << text << " at " << want->dump();
    if (want->is_structured()) {
      ASSERT_EQ(got->size(), want->size()) << text;
      if (want->is_array()) {
        for (std::size_t i = 0; i < want->size(); ++i) pending.emplace_back(&(*got)[i], &(*want)[i]);
      } else {
        for (auto it = want->begin(); it != want->end(); ++it) pending.emplace_back(&got->at(it.key()), &it.value());
      }
    }
  }
}

TEST(JsonFastParseTest, ChatBodiesComeOutAsNlohmannReadsThem) {
  expect_as_nlohmann(R"({"model":"cloud-small","messages":[{"role":"user","content":"hi"}],"max_tokens":64,
                        "temperature":0.2,"stream":false,"stop":null,"seed":-3,"n":1})");
  expect_as_nlohmann(R"({"messages":[{"role":"user","content":[{"type":"text","text":"订单 12345 到哪了？"}]}],
                        "hengshi":{"task_type":"faq","deadline_ms":800}})");
  expect_as_nlohmann(R"({"a":"\u00e9\ud83d\ude00 \"quoted\" \\ \n","b":[1,-1,1.5,-0.25,1e3,2E-2,0]})");
  expect_as_nlohmann(R"({"big":18446744073709551615,"neg":-9223372036854775808,"max":9223372036854775807})");
  expect_as_nlohmann(R"([[],{},[[{}]],"",true,false,null])");
  expect_as_nlohmann("  {\"x\" : 1 }\n");
  expect_as_nlohmann("3");
  // "-0": nlohmann makes it a signed 0, simdjson's tape cannot tell it from "0" (unsigned here).
  // The same integer either way: equal, integral, dumped as 0.
  const std::optional<json> minus_zero = parse_json_fast("[-0]", 64);
  ASSERT_TRUE(minus_zero.has_value());
  EXPECT_EQ(*minus_zero, json::parse("[-0]"));
  EXPECT_TRUE((*minus_zero)[0].is_number_integer());
  EXPECT_EQ(minus_zero->dump(), "[0]");
}

TEST(JsonFastParseTest, TheLastOfARepeatedNameWins) {
  const std::optional<json> fast = parse_json_fast(R"({"model":"a","model":{"x":1},"model":"c"})", 64);
  ASSERT_TRUE(fast.has_value());
  EXPECT_EQ((*fast)["model"], "c");
  EXPECT_EQ(fast->size(), 1u);
  expect_as_nlohmann(R"({"k":[1,2],"k":3})");
}

// A reader of the text may take a repeated name's first value where the DOM holds the last: the
// parse says so, at any depth, so that nobody forwards the text in place of the DOM.
TEST(JsonFastParseTest, SaysWhetherAnyObjectRepeatsAName) {
  // `answer` starts as the opposite of what is expected: the parse must write it.
  const auto repeats = [](const std::string& text, bool answer) {
    TextBeyondDom beyond{.repeated_names = answer};
    EXPECT_TRUE(parse_json_fast(text, 64, &beyond).has_value()) << text;
    return beyond.repeated_names;
  };
  EXPECT_FALSE(repeats(R"({"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]})", true));
  EXPECT_TRUE(repeats(R"({"a":1,"a":1})", false));
  EXPECT_TRUE(repeats(R"({"messages":[{"role":"user","content":"x","content":"y"}]})", false));
  EXPECT_TRUE(repeats(R"([[{"deep":{"k":1,"k":2}}]])", false));
  EXPECT_FALSE(repeats(R"(["a","a"])", true)) << "equal strings in an array are no names";
  // Wide objects (sorted, not compared pair by pair): a repeat among ten names, and none.
  EXPECT_TRUE(repeats(R"({"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"b":2})", false));
  EXPECT_FALSE(repeats(R"({"a":1,"b":1,"c":1,"d":1,"e":1,"f":1,"g":1,"h":1,"i":1,"j":2})", true));
}

// A double keeps about 17 digits; the text may carry more (a 19-digit card written as
// 6222021234567890123.0). The root's own members (temperature, top_p) are the API's parameters.
TEST(JsonFastParseTest, SaysWhetherADoubleSitsBelowTheRootsMembers) {
  const auto nested = [](const std::string& text, bool answer) {
    TextBeyondDom beyond{.nested_doubles = answer};
    EXPECT_TRUE(parse_json_fast(text, 64, &beyond).has_value()) << text;
    return beyond.nested_doubles;
  };
  EXPECT_FALSE(nested(R"({"temperature":0.5,"top_p":1e-1,"n":{"k":7},"a":[1,-2]})", true));
  EXPECT_TRUE(nested(R"({"metadata":{"card":6222021234567890123.0}})", false));
  EXPECT_TRUE(nested(R"({"a":[1.5]})", false));
  EXPECT_TRUE(nested(R"({"a":[{"b":[2e3]}]})", false));
  EXPECT_FALSE(nested("[0.5]", true)) << "an array root's elements are its own, like members";
  EXPECT_TRUE(nested("[[0.5]]", false));
}

TEST(JsonFastParseTest, LeavesToNlohmannWhatSimdjsonRefusesOrWhatIsTooDeep) {
  // Invalid JSON, invalid UTF-8, trailing garbage and an empty body.
  for (const std::string text : {"{", R"({"a":})", "{\"a\":\"\xff\"}", "{} x", "", R"({"a":01})"}) {
    EXPECT_FALSE(parse_json_fast(text, 64).has_value()) << text;
  }
  // An integer beyond 64 bits, which nlohmann reads as a double.
  EXPECT_FALSE(parse_json_fast(R"({"n":123456789012345678901234567890})", 64).has_value());
  // Depth: 3 levels pass at a limit of 3, 4 do not.
  EXPECT_TRUE(parse_json_fast(R"({"a":[{"b":1}]})", 3).has_value());
  EXPECT_FALSE(parse_json_fast(R"({"a":[{"b":[1]}]})", 3).has_value());
  EXPECT_TRUE(parse_json_fast(R"({"a":[{"b":"[[[[[[["}]})", 3).has_value());  // brackets in strings
}

}  // namespace
}  // namespace hengshi
