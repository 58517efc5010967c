#include "core/json_text.h"

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace hengshi {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8Snippet, ValidTextPassesUnchanged) {
  const std::string text = "héllo 你好 \xF0\x9F\x98\x80";
  EXPECT_EQ(valid_utf8(text), text);
  EXPECT_EQ(utf8_snippet(text, 1000), text);
}

TEST(Utf8Snippet, InvalidBytesAreReplaced) {
  EXPECT_EQ(valid_utf8("a\x80z"), "a" + kReplacement + "z");
  EXPECT_EQ(valid_utf8("\xC0\xAF"),
            kReplacement + kReplacement);  // overlong '/'
  EXPECT_EQ(valid_utf8("\xED\xA0\x80"),
            kReplacement + kReplacement + kReplacement);  // surrogate
  EXPECT_EQ(valid_utf8("\xF4\x90\x80\x80").size(),
            4 * kReplacement.size());  // > U+10FFFF
  EXPECT_EQ(valid_utf8("end \xE4\xBD"),
            "end " + kReplacement + kReplacement);  // truncated
}

TEST(Utf8Snippet, CutsOnACharacterBoundary) {
  const std::string text = "ab你好";  // 2 + 3 + 3 bytes
  EXPECT_EQ(utf8_snippet(text, 8), text);
  EXPECT_EQ(utf8_snippet(text, 7), "ab你...");
  EXPECT_EQ(utf8_snippet(text, 4), "ab...");
  EXPECT_EQ(utf8_snippet(text, 0), "...");
}

TEST(Utf8Snippet, EveryCutOfEveryPrefixDumpsStrictly) {
  const std::string text = "x\xE4\xBD\xA0\xF0\x9F\x98\x80\xFFy\xC3\xA9";
  for (std::size_t prefix = 0; prefix <= text.size(); ++prefix) {
    for (std::size_t limit = 0; limit <= text.size() + 6; ++limit) {
      std::string out = utf8_snippet(std::string_view(text).substr(0, prefix), limit);
      EXPECT_NO_THROW((void)nlohmann::json(out).dump()) << prefix << " " << limit;
      EXPECT_LE(out.size(), limit + 3);
    }
  }
}

TEST(JsonText, NestingIsCountedOutsideStringsOnly) {
  EXPECT_FALSE(json_nesting_exceeds(std::string(64, '[') + std::string(64, ']'), 64));
  EXPECT_TRUE(json_nesting_exceeds(std::string(65, '['), 64));
  EXPECT_FALSE(json_nesting_exceeds(R"({"a":")" + std::string(1000, '[') + R"("})", 64));
  EXPECT_FALSE(json_nesting_exceeds(R"(["\"", [[]]])", 3));  // an escaped quote does not end the string
  EXPECT_TRUE(json_nesting_exceeds(R"(["\"", [[[]]]])", 3));
}

TEST(JsonText, DumpTextNeverThrowsOnOutsideBytes) {
  nlohmann::json value = {{"text", std::string("ok \x80\xff")}};
  EXPECT_THROW((void)value.dump(), nlohmann::json::type_error);
  std::string text;
  EXPECT_NO_THROW(text = dump_text(value));
  EXPECT_TRUE(nlohmann::json::accept(text));
}

// dump_text is written by hand for speed; on valid text it must be nlohmann's dump() byte for
// byte, so nothing the gateway forwards or logs changes with it.
TEST(JsonText, DumpTextIsNlohmannsDumpForValidText) {
  const auto doc = nlohmann::json::parse(R"({"model":"m","messages":[{"role":"user","content":"a \"q\" \\ \n\t\b\f\u0001 你好 \ud83d\ude00"}],
      "temperature":0.2,"top_p":1.0,"n":1,"seed":-7,"big":18446744073709551615,"tiny":1e-05,"small":0.0001,
      "huge":1e+300,"neg":-0.0,"flags":[true,false,null],"empty":{},"none":[],"nested":{"b":{"a":[1,[2,[3]]]}},
      "z":"\u007f"})");
  EXPECT_EQ(dump_text(doc), doc.dump());
  for (const auto& member : doc) EXPECT_EQ(dump_text(member), member.dump()) << member.dump();
  const auto binary = nlohmann::json{{"blob", nlohmann::json::binary({1, 2, 255})}, {"n", 1}};
  EXPECT_EQ(dump_text(binary), binary.dump());  // no parse makes one; still nlohmann's bytes
  EXPECT_EQ(dump_text(nlohmann::json(std::numeric_limits<double>::infinity())), "null");
  EXPECT_EQ(dump_text(nlohmann::json()), "null");
}

TEST(JsonText, AppendDumpTextAppendsWhatDumpTextReturns) {
  const nlohmann::json value = {{"text", std::string("ok \x80\xff")}, {"n", 1.5}, {"list", {1, "two", nullptr}}};
  std::string out = "{\"x\":";
  EXPECT_NO_THROW(append_dump_text(out, value));
  EXPECT_EQ(out, "{\"x\":" + dump_text(value));
  out += '}';
  EXPECT_TRUE(nlohmann::json::accept(out)) << out;
}

}  // namespace
}  // namespace hengshi

namespace hengshi {
namespace {

std::string json_literal(std::string_view text) {
  std::string out;
  append_json_string(out, text);
  return out;
}

TEST(JsonWriter, StringsReadBackAsTheyWereWithBadBytesReplaced) {
  for (std::string text : {std::string("plain"), std::string("quote \" back \\ nl \n tab \t cr \r"),
                           std::string("ctl \x01\x1f del \x7f"), std::string("你好 \xF0\x9F\x98\x80")}) {
    EXPECT_EQ(nlohmann::json::parse(json_literal(text)).get<std::string>(), text) << text;
    EXPECT_EQ(json_literal(text), nlohmann::json(text).dump()) << "the same text nlohmann writes";
  }
  EXPECT_EQ(nlohmann::json::parse(json_literal("a\x80z")).get<std::string>(), "a" + kReplacement + "z");
  EXPECT_EQ(nlohmann::json::parse(json_literal("cut \xE4\xBD")).get<std::string>(), "cut " + kReplacement + kReplacement);
}

// Plain runs are skipped eight bytes at a time: every special byte at every offset of a word, and
// every length around a word's edge, must still be escaped exactly as nlohmann does.
TEST(JsonWriter, EscapesAtEveryOffsetOfTheWordScan) {
  const std::vector<std::string> specials = {"\"", "\\", "\n", std::string(1, '\0'), "\x01", "\x1f", " ", "\x7f",
                                             "~", "\xC3\xA9", "\xE4\xBD\xA0"};
  for (std::size_t length = 0; length <= 20; ++length) {
    EXPECT_EQ(json_literal(std::string(length, 'a')), nlohmann::json(std::string(length, 'a')).dump());
    for (std::size_t at = 0; at < length; ++at) {
      for (const std::string& special : specials) {
        std::string text(length, 'a');
        text.replace(at, 1, special);
        EXPECT_EQ(json_literal(text), nlohmann::json(text).dump()) << length << " " << at;
      }
    }
  }
}

TEST(JsonWriter, NumbersReadBackExactlyAndNonFiniteIsNull) {
  for (double value : {0.0, 1.0, 0.1, 1e-7, 0.9999999999, 123456.789, -2.5}) {
    std::string out;
    append_json_number(out, value);
    EXPECT_EQ(nlohmann::json::parse(out).get<double>(), value) << out;
  }
  std::string out;
  append_json_number(out, std::numeric_limits<double>::quiet_NaN());
  EXPECT_EQ(out, "null");
}

TEST(JsonWriter, LastMemberIsAddedToEmptyAndFullObjects) {
  EXPECT_EQ(with_last_member("{}", "hengshi", "1"), R"({"hengshi":1})");
  EXPECT_EQ(nlohmann::json::parse(with_last_member(" { \n } \n", "hengshi", "1")), nlohmann::json({{"hengshi", 1}}));
  EXPECT_EQ(with_last_member(R"({"a":{"b":"}"}} )", "hengshi", "null"), R"({"a":{"b":"}"},"hengshi":null})");
}

}  // namespace
}  // namespace hengshi
