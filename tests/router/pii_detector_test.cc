#include "router/pii_detector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

#include "support/pii_samples.h"

namespace hengshi::router {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Test numbers are computed, not copied (support/pii_samples.h applies the published algorithms).
using testing::id_check_char;
using testing::luhn_valid;

// `payload` plus the digit that makes it Luhn-valid.
std::string with_luhn_digit(const std::string& payload) {
  for (char check = '0'; check <= '9'; ++check) {
    if (luhn_valid(payload + check)) return payload + check;
  }
  ADD_FAILURE() << "no Luhn digit for " << payload;
  return payload;
}

std::string with_id_check(const std::string& first17) { return first17 + id_check_char(first17); }

// Area 110105, birth date `date`, sequence numbers tried from 100 until `accept` likes the ID.
template <typename Accept>
std::string make_id(const std::string& date, Accept accept) {
  for (int sequence = 100; sequence < 1000; ++sequence) {
    std::string id = with_id_check("110105" + date + std::to_string(sequence));
    if (accept(id)) return id;
  }
  ADD_FAILURE() << "no ID found for " << date;
  return {};
}

std::string make_id(const std::string& date) {
  return make_id(date, [](const std::string&) { return true; });
}

// An ID written 6-8-4 with double spaces and a dash.
std::string id_grouped_like_a_card() {
  const std::string id = make_id("19900307");
  return id.substr(0, 6) + "  " + id.substr(6, 8) + " - " + id.substr(14);
}

PiiDetector detector(const PiiConfig& config = {}) {
  auto created = PiiDetector::create(config);
  EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error().message);
  return std::move(created).value();
}

std::vector<std::string> kinds(const std::vector<PiiMatch>& matches) {
  std::vector<std::string> result;
  result.reserve(matches.size());
  for (const PiiMatch& match : matches) result.push_back(match.kind);
  return result;
}

// The whole text is one match of `kind`.
void expect_whole(const PiiDetector& pii, const std::string& text, const std::string& kind) {
  EXPECT_THAT(pii.find(text), ElementsAre(PiiMatch{kind, 0, text.size()})) << text;
  EXPECT_TRUE(pii.contains(text)) << text;
}

void expect_none(const PiiDetector& pii, const std::string& text) {
  EXPECT_THAT(pii.find(text), IsEmpty()) << text;
  EXPECT_FALSE(pii.contains(text)) << text;
}

TEST(PiiDetectorTest, HelpersAgreeWithPublishedExamples) {
  EXPECT_TRUE(luhn_valid("4111111111111111"));  // the well-known Visa test number
  EXPECT_EQ(with_luhn_digit("411111111111111"), "4111111111111111");
  EXPECT_EQ(id_check_char("11010519491231002"), 'X');  // GB 11643's own example ID
}

TEST(PiiDetectorTest, FindsMobileNumbers) {
  const PiiDetector pii = detector();
  for (const std::string text :
       {"13812345678", "19912345678", "138 1234 5678", "138-1234-5678", "+8613812345678",
        "+86 13812345678", "+86-138-1234-5678", "0086 13812345678", "008613812345678",
        "8613812345678", "86 138 1234 5678", "＋86 13812345678",
        "１３８１２３４５６７８"}) {  // full-width digits, as Chinese IMEs type them
    expect_whole(pii, text, "mobile_cn");
  }
}

// Ways people (or a client trying to slip past the router) write a mobile number.
TEST(PiiDetectorTest, FindsMobileNumbersWrittenEvasively) {
  const PiiDetector pii = detector();
  for (const std::string text : {"138.1234.5678",       // dots
                                 "138  1234  5678",     // double spaces
                                 "138   1234    5678",  // several spaces
                                 "138 - 1234 - 5678",   // mixed separators
                                 "138-1234 5678",
                                 "138.1234-5678",
                                 "138 .1234. 5678",
                                 "138\t1234\t5678",          // tabs
                                 "138\u00a01234\u00a05678",  // no-break spaces
                                 "138\u20131234\u20145678",  // en and em dashes
                                 "138·1234·5678",
                                 "138・1234・5678",  // middle dots
                                 "1381234 5678",
                                 "1381234-5678",                // 7-4
                                 "138 12345678",                // 3-8
                                 "１３８．１２３４．５６７８",  // full-width digits and dots
                                 "１３８－１２３４－５６７８",  // full-width dashes
                                 "１３８　１２３４　５６７８",  // ideographic spaces
                                 "１３８１２３４　５６７８",    // full-width 7-4
                                 "+86.138.1234.5678",
                                 "+86  138  1234  5678",
                                 "＋８６　１３８．１２３４．５６７８",
                                 "0086 - 138 - 1234 - 5678"}) {
    expect_whole(pii, text, "mobile_cn");
  }
  const std::string prefix = "手机：";
  EXPECT_THAT(pii.find(prefix + "138.1234.5678。"),
              ElementsAre(PiiMatch{"mobile_cn", prefix.size(), 13}));
}

TEST(PiiDetectorTest, EvasionRulesKeepTheirNearMisses) {
  const PiiDetector pii = detector();
  expect_none(pii, "138     1234 5678");  // five spaces: more than a separator
  expect_none(pii, "1381 2345 678");      // 4-4-3 is not how a mobile is written
  expect_none(pii, "13.812.345.678");     // nor 2-3-3-3
  expect_none(pii, "138.1234.56789");     // 12 digits
  expect_none(pii, "128.1234.5678");      // no mobile starts 12
  expect_none(pii, "version 13.8.1234.5678");
  // Dots join phone numbers only: a decimal never becomes a card or an ID.
  const std::string card = with_luhn_digit("622202123456789");
  expect_none(pii, "amount " + card.substr(0, 4) + "." + card.substr(4) + " yuan");
  const std::string id = make_id("19900307");
  expect_none(pii, id.substr(0, 10) + "." + id.substr(10));
}

TEST(PiiDetectorTest, FindsMobileInsideChineseText) {
  const PiiDetector pii = detector();
  const std::string prefix = "我的手机是";
  EXPECT_THAT(pii.find(prefix + "13812345678请回电"),
              ElementsAre(PiiMatch{"mobile_cn", prefix.size(), 11}));
  EXPECT_THAT(pii.find("call me at 138-1234-5678, thanks"),
              ElementsAre(PiiMatch{"mobile_cn", 11, 13}));
}

// Digits are searched eight bytes at a time: a number starting at any offset of a word, after
// ASCII letters or after a full-width digit's lead byte, is still found where it starts.
TEST(PiiDetectorTest, FindsANumberAtEveryOffsetOfTheWordScan) {
  const PiiDetector pii = detector();
  for (std::size_t at = 0; at <= 17; ++at) {
    const std::string prefix = std::string(at, 'x') + " ";
    EXPECT_THAT(pii.find(prefix + "13812345678 ok"), ElementsAre(PiiMatch{"mobile_cn", prefix.size(), 11})) << at;
    // "/:" sit just below and above the digits in ASCII.
    EXPECT_THAT(pii.find(std::string(at, '/') + ":" + "13812345678"),
                ElementsAre(PiiMatch{"mobile_cn", at + 1, 11}))
        << at;
  }
  const std::string full_width_one = "\xEF\xBC\x91";  // １
  EXPECT_THAT(pii.find("abcdefgh" + full_width_one + "3812345678"),
              ElementsAre(PiiMatch{"mobile_cn", 8, full_width_one.size() + 10}));
}

// Strings without a digit, an '@' or a non-ASCII byte skip the built-in kinds after one pass over
// their words: whatever sits at any offset of that pass (a digit, '@', a full-width digit or at
// sign, the bytes just beside '0'-'9' and '@') is still seen, and custom patterns still run.
TEST(PiiDetectorTest, TheQuickPassSeesEveryKindAtEveryOffset) {
  const PiiDetector pii = detector({true, {{"ticket", "TICKET-[A-Z]{4}"}}});
  const std::string full_width_one = "\xEF\xBC\x91";  // １
  const std::string full_width_at = "\xEF\xBC\xA0";   // ＠
  for (std::size_t at = 0; at <= 17; ++at) {
    const std::string pad(at, '?');  // '?' sits just below '@'; ':' just above the digits
    EXPECT_THAT(pii.find(pad + " 13812345678"), ElementsAre(PiiMatch{"mobile_cn", at + 1, 11})) << at;
    EXPECT_THAT(pii.find(pad + " " + full_width_one + "3812345678"),
                ElementsAre(PiiMatch{"mobile_cn", at + 1, full_width_one.size() + 10}))
        << at;
    EXPECT_THAT(pii.find(pad + " a@b.co :"), ElementsAre(PiiMatch{"email", at + 1, 6})) << at;
    EXPECT_THAT(pii.find(pad + " zhang" + full_width_at + "example.com"),
                ElementsAre(PiiMatch{"email", at + 1, 5 + full_width_at.size() + 11}))
        << at;
    EXPECT_THAT(pii.find(pad + " TICKET-ABCD"), ElementsAre(PiiMatch{"custom:ticket", at + 1, 11})) << at;
    expect_none(pii, pad + " plain words:/ ?A[`{ only");
  }
}

TEST(PiiDetectorTest, MobileNearMisses) {
  const PiiDetector pii = detector();
  expect_none(pii, "138123456789");                // 12 digits
  expect_none(pii, "1381234567");                  // 10 digits
  expect_none(pii, "12812345678");                 // no mobile starts 12
  expect_none(pii, "13 812 345 678");              // not 3-4-4
  expect_none(pii, "订单号 2023112912345678901");  // a long run (19 digits, Luhn-invalid)
  expect_none(pii, "v1.2.3 build 20231129");
}

TEST(PiiDetectorTest, TwoMobilesSeparatedBySpaceAreTwoMatches) {
  const PiiDetector pii = detector();
  EXPECT_THAT(pii.find("13812345678 13987654321"),
              ElementsAre(PiiMatch{"mobile_cn", 0, 11}, PiiMatch{"mobile_cn", 12, 11}));
}

TEST(PiiDetectorTest, FindsResidentIds) {
  const PiiDetector pii = detector();
  const std::string id = make_id("19900307");
  expect_whole(pii, id, "id_cn");
  expect_whole(pii, "11010519491231002X", "id_cn");
  expect_whole(pii, "11010519491231002x", "id_cn");
  expect_whole(pii, "11010519491231002Ｘ", "id_cn");
  expect_whole(pii, id.substr(0, 6) + " " + id.substr(6, 8) + " " + id.substr(14), "id_cn");
  expect_whole(pii, make_id("20000229"), "id_cn");  // 2000 is a leap year

  const std::string prefix = "身份证号：";
  EXPECT_THAT(pii.find(prefix + id + "。"), ElementsAre(PiiMatch{"id_cn", prefix.size(), 18}));
}

TEST(PiiDetectorTest, ResidentIdNearMisses) {
  const PiiDetector pii = detector();
  const std::string id = make_id("19900307");

  // A wrong check char, chosen so the 18 digits are not a Luhn-valid card either.
  std::string wrong = id;
  for (char check = '0'; check <= '9' && (wrong == id || luhn_valid(wrong)); ++check) {
    wrong.back() = check;
  }
  ASSERT_NE(wrong, id);
  ASSERT_FALSE(luhn_valid(wrong));
  expect_none(pii, wrong);

  // Valid checksums, impossible dates: Feb 30, month 13, Feb 29 1900 (not a leap year), 1899,
  // day 0. Chosen Luhn-invalid so they are not cards.
  for (const std::string date : {"19900230", "19901301", "19000229", "18991231", "19900100"}) {
    const std::string impossible =
        make_id(date, [](const std::string& candidate) { return !luhn_valid(candidate); });
    expect_none(pii, impossible);
  }

  // A digit after or before: a 19-digit run, chosen Luhn-invalid so it is not a card either.
  const auto luhn_invalid_variant = [](const auto& make) {
    for (char extra = '0'; extra <= '9'; ++extra) {
      if (!luhn_valid(make(extra))) return make(extra);
    }
    return std::string();
  };
  expect_none(pii, luhn_invalid_variant([&](char extra) { return id + extra; }));
  expect_none(pii, luhn_invalid_variant([&](char extra) { return extra + id; }));
}

TEST(PiiDetectorTest, LuhnValidIdIsReportedAsIdOnly) {
  const PiiDetector pii = detector();
  const std::string id = make_id("19851120", [](const std::string& id) { return luhn_valid(id); });
  expect_whole(pii, id, "id_cn");
}

TEST(PiiDetectorTest, FindsBankCards) {
  const PiiDetector pii = detector();
  const std::string card16 = with_luhn_digit("622202123456789");
  const std::string card19 = with_luhn_digit("622202123456789012");
  const std::string card13 = with_luhn_digit("400000000000");
  ASSERT_EQ(card16.size(), 16u);
  ASSERT_EQ(card19.size(), 19u);
  expect_whole(pii, card16, "bank_card");
  expect_whole(pii, card19, "bank_card");
  expect_whole(pii, card13, "bank_card");
  expect_whole(pii, "4111 1111 1111 1111", "bank_card");
  expect_whole(pii, "4111-1111-1111-1111", "bank_card");
  const std::string grouped19 = card19.substr(0, 4) + " " + card19.substr(4, 4) + " " +
                                card19.substr(8, 4) + " " + card19.substr(12, 4) + " " +
                                card19.substr(16);
  expect_whole(pii, grouped19, "bank_card");
  // Separators of any width and number (up to four) join groups as they do for phones.
  expect_whole(pii, "4111  1111 1111 1111", "bank_card");
  expect_whole(pii, "4111 - 1111 - 1111 - 1111", "bank_card");
  expect_whole(pii, "４１１１　１１１１　１１１１　１１１１", "bank_card");
  expect_whole(pii, id_grouped_like_a_card(), "id_cn");

  const std::string prefix = "卡号";
  EXPECT_THAT(pii.find(prefix + card16 + "，谢谢"),
              ElementsAre(PiiMatch{"bank_card", prefix.size(), 16}));
}

TEST(PiiDetectorTest, BankCardNearMisses) {
  const PiiDetector pii = detector();
  std::string invalid = with_luhn_digit("622202123456789");
  invalid.back() = static_cast<char>('0' + (invalid.back() - '0' + 1) % 10);
  expect_none(pii, invalid);                           // Luhn-invalid 16 digits
  expect_none(pii, with_luhn_digit("62220212345"));    // 12 digits: too short
  expect_none(pii, "4111     1111 1111 1111");         // five spaces split the groups
  expect_none(pii, "amount 4111.1111111111111 yuan");  // the dot splits it into short runs
}

TEST(PiiDetectorTest, FindsEmails) {
  const PiiDetector pii = detector();
  for (const std::string text : {"a@b.co", "Zhang.San+tag@mail.Example.com.cn",
                                 "first_last-1%x@sub-domain.example.org", "USER@EXAMPLE.COM"}) {
    expect_whole(pii, text, "email");
  }
  const std::string prefix = "邮箱";
  EXPECT_THAT(pii.find(prefix + "zhangsan@163.com，谢谢"),
              ElementsAre(PiiMatch{"email", prefix.size(), 16}));
  EXPECT_THAT(pii.find("mail me@example.com."), ElementsAre(PiiMatch{"email", 5, 14}));
}

TEST(PiiDetectorTest, FindsInternationalAndFullWidthEmails) {
  const PiiDetector pii = detector();
  for (const std::string text :
       {"张三@example.com", "ü@例子.com", "josé.garcía@correo.es", "ИВАН@почта.рф",
        "zhang＠example．com", "zhang＠example.com", "zhang@example．com．cn", "zhang﹫example.com",
        "ｚｈａｎｇ＠ｅｘａｍｐｌｅ．ｃｏｍ", "zhang@example。com", "用户@例子.公司",
        "13812345678＠qq．com"}) {
    expect_whole(pii, text, "email");
  }
  // A CJK local part runs to the start of the CJK run; a Latin one stops at CJK text.
  const std::string prefix = "联系人：";
  EXPECT_THAT(
      pii.find(prefix + "张三@example.com。"),
      ElementsAre(PiiMatch{"email", prefix.size(), std::string("张三@example.com").size()}));
  EXPECT_THAT(pii.find("邮箱zhang＠example．com，谢谢"),
              ElementsAre(PiiMatch{"email", std::string("邮箱").size(),
                                   std::string("zhang＠example．com").size()}));
}

TEST(PiiDetectorTest, EmailNearMisses) {
  const PiiDetector pii = detector();
  for (const std::string text :
       {"foo@bar", "@example.com", "user@.com", "user@example.c", "price @ 5 yuan", "a @ b.com",
        "foo@bar。谢谢",  // a sentence ending is not a Han TLD
        "张三＠", "价格＠５元", "a＠b", "＠example．com", "user@例子.c"}) {
    expect_none(pii, text);
  }
}

TEST(PiiDetectorTest, OverlapsResolveToTheEarliestLongestMatch) {
  const PiiDetector pii = detector();
  expect_whole(pii, "13812345678@qq.com", "email");
}

TEST(PiiDetectorTest, FindsEverythingInOrder) {
  const PiiDetector pii = detector();
  const std::string id = make_id("19900307");
  const std::string text = "邮箱a@b.com 电话13812345678 身份证" + id;
  EXPECT_THAT(kinds(pii.find(text)), ElementsAre("email", "mobile_cn", "id_cn"));
}

TEST(PiiDetectorTest, CustomPatterns) {
  const PiiDetector pii = detector({true, {{"order", R"(ORD-\d{8})"}, {"plate", "京[A-Z]\\d{5}"}}});
  EXPECT_THAT(pii.find("order ORD-20231129 car 京A12345"),
              ElementsAre(PiiMatch{"custom:order", 6, 12}, PiiMatch{"custom:plate", 23, 9}));
  EXPECT_TRUE(pii.contains("ORD-12345678"));
  EXPECT_FALSE(pii.contains("ORD-1234"));
}

TEST(PiiDetectorTest, RedactReplacesEachMatchByItsKind) {
  const PiiDetector pii = detector({true, {{"order", R"(ORD-\d{8})"}}});
  EXPECT_EQ(pii.redact("我的手机是13812345678请回电，邮箱 a@b.com，订单 ORD-20231129"),
            "我的手机是[mobile_cn]请回电，邮箱 [email]，订单 [custom:order]");
  EXPECT_EQ(pii.redact("nothing here"), "nothing here");
  EXPECT_EQ(pii.redact(""), "");
}

TEST(PiiDetectorTest, DisabledDetectsNothing) {
  const PiiDetector pii = detector({false, {{"order", R"(ORD-\d{8})"}}});
  expect_none(pii, "13812345678 a@b.com ORD-20231129");
}

TEST(PiiDetectorTest, ContainsAgreesWithFind) {
  const PiiDetector pii = detector();
  for (const std::string& text : std::vector<std::string>{
           "", "hello", "13812345678", "x 4111 1111 1111 1111 y", "a@b.com", "1234567890123",
           "我的身份证是" + make_id("19900307"), "138.1234.5678", "１３８１２３４　５６７８",
           "张三＠例子．com", "foo@bar。谢谢", "138     1234 5678"}) {
    EXPECT_EQ(pii.contains(text), !pii.find(text).empty()) << text;
  }
}

TEST(PiiDetectorTest, ConfigErrors) {
  const auto bad_regex = PiiDetector::create({true, {{"ok", "a+"}, {"broken", "(abc"}}});
  ASSERT_FALSE(bad_regex.ok());
  EXPECT_EQ(bad_regex.error().code, "config_invalid");
  EXPECT_THAT(bad_regex.error().message, ::testing::StartsWith("patterns[1] (broken): "));
  EXPECT_GT(bad_regex.error().message.size(), std::string("patterns[1] (broken): ").size());

  const auto empty_match = PiiDetector::create({true, {{"anything", "x*"}}});
  ASSERT_FALSE(empty_match.ok());
  EXPECT_EQ(empty_match.error().message, "patterns[0] (anything): regex matches the empty string");

  const auto no_name = PiiDetector::create({true, {{"", "abc"}}});
  ASSERT_FALSE(no_name.ok());
  EXPECT_EQ(no_name.error().message, "patterns[0] (): name must not be empty");

  const auto duplicate = PiiDetector::create({true, {{"a", "abc"}, {"a", "def"}}});
  ASSERT_FALSE(duplicate.ok());
  EXPECT_EQ(duplicate.error().message, "patterns[1] (a): duplicate name (also patterns[0])");

  // A disabled config is still validated: a bad file never half-applies.
  EXPECT_FALSE(PiiDetector::create({false, {{"broken", "(abc"}}}).ok());
}

TEST(PiiDetectorTest, CopiesShareTheCompiledPatterns) {
  const PiiDetector original = detector({true, {{"order", R"(ORD-\d{8})"}}});
  const PiiDetector copy = original;  // NOLINT(performance-unnecessary-copy-initialization)
  EXPECT_TRUE(copy.contains("ORD-20231129"));
}

}  // namespace
}  // namespace hengshi::router
