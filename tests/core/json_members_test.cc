#include "core/json_members.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hengshi {
namespace {

simdjson::dom::object object_of(simdjson::dom::parser& parser, const std::string& text) {
  return parser.parse(text).get_object().value();
}

// Code reading simdjson's tape keeps the nlohmann DOM's reading: the last of a repeated name.
TEST(JsonMembersTest, LastMemberIsTheLastOfARepeatedName) {
  simdjson::dom::parser parser;
  const auto object = object_of(parser, R"({"a":1,"b":"x","a":2,"a":3})");
  simdjson::dom::element found;
  ASSERT_TRUE(last_member(object, "a", found));
  EXPECT_EQ(found.get_int64().value(), 3);
  ASSERT_TRUE(last_member(object, "b", found));
  EXPECT_EQ(found.get_string().value(), "x");
  EXPECT_FALSE(last_member(object, "c", found));
}

// Members in the order nlohmann's std::map holds them, each name once with its last value, for
// objects small enough for the insertion sort and larger ones.
TEST(JsonMembersTest, SortedMembersAreTheDomsMembersInItsOrder) {
  std::string wide = "{";
  for (int i = 0; i < 80; ++i) wide += "\"k" + std::to_string((i * 37) % 50) + "\":" + std::to_string(i) + ",";
  wide.back() = '}';
  for (const std::string& text : {std::string(R"({"b":1,"a":2,"c":3,"a":4,"ab":5,"":6,"B":7})"), std::string("{}"),
                                  std::string(R"({"z":[1],"z":{"y":2}})"), wide}) {
    simdjson::dom::parser parser;
    const JsonMembers members = sorted_members(object_of(parser, text));
    const nlohmann::json dom = nlohmann::json::parse(text);
    ASSERT_EQ(members.size(), dom.size()) << text;
    std::size_t i = 0;
    for (auto it = dom.begin(); it != dom.end(); ++it, ++i) {
      EXPECT_EQ(members[i].key, it.key()) << text;
      EXPECT_EQ(nlohmann::json::parse(simdjson::to_string(members[i].value)), it.value()) << text << " " << it.key();
    }
  }
}

}  // namespace
}  // namespace hengshi
