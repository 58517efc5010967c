#include "core/json_raw_members.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hengshi {
namespace {

using nlohmann::json;

constexpr std::array<std::string_view, 2> kLeftOut = {"model", "hengshi"};

// The members read back as JSON are the DOM's members but the ones left out: nothing lost,
// nothing added, whatever the spacing, nesting and escapes inside the values.
void expect_same_members(const std::string& text) {
  const std::optional<std::string> members = json_raw_members(text, kLeftOut);
  ASSERT_TRUE(members.has_value()) << text;
  json expected = json::parse(text);
  for (std::string_view name : kLeftOut) expected.erase(std::string(name));
  EXPECT_EQ(json::parse("{" + *members + "}"), expected) << text << "\n -> " << *members;
}

TEST(JsonRawMembersTest, KeepsEachValueByteForByteInTheTextsOrder) {
  const std::optional<std::string> members = json_raw_members(
      R"( { "z" : 0.50 , "model":"m", "a":{"b" : [1, 2.0e1]},"hengshi":{"task_type":"faq"} ,"t":true} )",
      kLeftOut);
  ASSERT_TRUE(members.has_value());
  EXPECT_EQ(*members, R"("z":0.50,"a":{"b" : [1, 2.0e1]},"t":true)");
}

TEST(JsonRawMembersTest, FindsTheEndOfEveryKindOfValue) {
  expect_same_members(R"({"model":"x","messages":[{"role":"user","content":"a } ] \" \\ { ["}],"n":null})");
  expect_same_members(R"({"s":"ends in a backslash \\","k":"\\\"","e":"\u00e9 你好","f":false})");
  expect_same_members(R"({"deep":[[[{"a":[{}]}]],[]],"neg":-1.5E-3,"big":18446744073709551615})");
  expect_same_members("{\n\t\"a\"\r\n:\n1\n,\n\"b\":[ ]\n}\n");
  expect_same_members(R"({"model":"only this"})");
}

// The string scan looks at sixteen bytes at a time: an escaped quote or backslash at every offset
// of one block, or the next, must still be read as part of the string.
TEST(JsonRawMembersTest, EscapesAtEveryOffsetOfTheBlockScan) {
  for (int k = 0; k < 40; ++k) {
    const std::string pad(k, 'a');
    expect_same_members(R"({"s":")" + pad + R"(\"b","t":1})");
    expect_same_members(R"({"s":")" + pad + R"(\\","t":[")" + pad + R"(\\\""]})");
  }
}

TEST(JsonRawMembersTest, AnEmptyObjectHasNoMembers) {
  EXPECT_EQ(json_raw_members("{}", kLeftOut), std::optional<std::string>(""));
  EXPECT_EQ(json_raw_members(" { } ", kLeftOut), std::optional<std::string>(""));
}

// A name with an escape would need decoding before it is compared with the names left out
// ("mod\u0065l" is "model"): the caller writes the DOM instead.
TEST(JsonRawMembersTest, AnEscapedNameIsLeftToTheDom) {
  EXPECT_FALSE(json_raw_members(R"({"mod\u0065l":"m","a":1})", kLeftOut).has_value());
  EXPECT_FALSE(json_raw_members(R"({"a":1,"q\"":2})", kLeftOut).has_value());
}

TEST(JsonRawMembersTest, WhatIsNotAnObjectHasNone) {
  for (const char* text : {"[1]", "\"s\"", "1", "", "   ", "{", R"({"a":1)", R"({"a":1} x)", R"({"a" 1})",
                           R"({"a":"unterminated})", R"({"a":1,})"}) {
    EXPECT_FALSE(json_raw_members(text, kLeftOut).has_value()) << text;
  }
}

}  // namespace
}  // namespace hengshi
