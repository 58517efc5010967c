#include "core/json_members.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/json_text.h"

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

// A body's parts are written as dump_text() writes nlohmann's DOM of them, byte for byte (the
// cache's keys hash them).
TEST(JsonMembersTest, DomTextIsTheDomsDump) {
  for (const std::string& text :
       {std::string(R"({"b":[1,-2,1.5,-0.25,1e3,2E-2,0,-0,18446744073709551615,-9223372036854775808],"a":null})"),
        std::string(R"({"s":"\u00e9\ud83d\ude00 \"q\" \\ \n \u0001 </x>","t":true,"f":false,"e":{},"l":[]})"),
        std::string(R"({"k":1,"k":{"z":[{"y":2,"x":3}]},"":"empty"})"), std::string(R"([0.1,100.0,1e20,-1.5e-7])"),
        std::string(R"("just a string")")}) {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    ASSERT_EQ(parser.parse(text).get(root), simdjson::SUCCESS) << text;
    std::string written;
    append_dom_text(written, root);
    EXPECT_EQ(written, dump_text(nlohmann::json::parse(text))) << text;
  }
}

}  // namespace
}  // namespace hengshi
