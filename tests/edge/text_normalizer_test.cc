#include "edge/text_normalizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace hengshi::edge {
namespace {

using Tokens = std::vector<std::string>;

TEST(TextNormalizerTest, FoldsFullWidthAsciiAndIdeographicSpace) {
  const TextNormalizer normalizer;
  EXPECT_EQ(normalizer.normalize("ＡＢＣ１２３"), "abc123");
  EXPECT_EQ(normalizer.normalize("Ｗｈｅｒｅ　ｉｓ　ｍｙ　ｏｒｄｅｒ？"), "where is my order?");
  EXPECT_EQ(normalizer.normalize("订单号：１２３４５"), "订单号:12345");
  EXPECT_EQ(normalizer.normalize("退款！"), "退款!");
}

TEST(TextNormalizerTest, AppliesNfkcCompatibilityMappings) {
  const TextNormalizer normalizer;
  EXPECT_EQ(normalizer.normalize("①"), "1");
  EXPECT_EQ(normalizer.normalize("５㎏"), "5kg");
  EXPECT_EQ(normalizer.normalize("ﬁle"), "file");
  EXPECT_EQ(normalizer.normalize("ｶﾀｶﾅ"), "カタカナ");   // half-width katakana → full-width
  EXPECT_EQ(normalizer.normalize("e\u0301"), "\u00e9");  // composed
}

TEST(TextNormalizerTest, FoldsCaseUnlessDisabled) {
  EXPECT_EQ(TextNormalizer().normalize("ÉCOLE Straße REFUND"), "école strasse refund");
  NormalizerSettings keep_case;
  keep_case.case_fold = false;
  EXPECT_EQ(TextNormalizer(keep_case).normalize("ＲＥＦＵＮＤ Now"), "REFUND Now");
}

TEST(TextNormalizerTest, CollapsesAndTrimsWhiteSpace) {
  const TextNormalizer normalizer;
  EXPECT_EQ(normalizer.normalize("  where \t is\n\n my   order  "), "where is my order");
  EXPECT_EQ(normalizer.normalize("\u3000\u3000我的\u00a0订单\u3000"), "我的 订单");
  EXPECT_EQ(normalizer.normalize("zero\u200bwidth"), "zerowidth");  // default ignorable removed
  EXPECT_EQ(normalizer.normalize(" \t\n"), "");
  EXPECT_EQ(normalizer.normalize(""), "");
}

TEST(TextNormalizerTest, SurvivesInvalidUtf8) {
  const TextNormalizer normalizer;
  const std::string broken = std::string("ab") + '\xff' + '\xfe' + "cd";
  const std::string out = normalizer.normalize(broken);
  EXPECT_NE(out.find("ab"), std::string::npos);
  EXPECT_NE(out.find("cd"), std::string::npos);
  EXPECT_NO_THROW((void)normalizer.tokenize(broken));
}

TEST(TextNormalizerTest, HanCharsSplitsChineseIntoCharacters) {
  NormalizerSettings settings;
  settings.segmentation = Segmentation::kHanChars;
  const TextNormalizer normalizer(settings);
  EXPECT_EQ(normalizer.tokenize("我要退款！"), (Tokens{"我", "要", "退", "款"}));
  EXPECT_EQ(normalizer.tokenize("我想 Cancel 订单１２３"),
            (Tokens{"我", "想", "cancel", "订", "单", "123"}));
  EXPECT_EQ(normalizer.to_model_input("我的　ORDER？"), "我 的 order");
}

TEST(TextNormalizerTest, IcuWordKeepsChineseWords) {
  NormalizerSettings settings;
  settings.segmentation = Segmentation::kIcuWord;
  const TextNormalizer normalizer(settings);
  const Tokens tokens = normalizer.tokenize("我想申请退款，谢谢");
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), "退款"), tokens.end())
      << ::testing::PrintToString(tokens);
  EXPECT_NE(std::find(tokens.begin(), tokens.end(), "谢谢"), tokens.end())
      << ::testing::PrintToString(tokens);
  for (const std::string& token : tokens) EXPECT_NE(token, "，");
}

TEST(TextNormalizerTest, LatinWordsStayWordsAndPunctuationIsDropped) {
  for (Segmentation segmentation : {Segmentation::kHanChars, Segmentation::kIcuWord}) {
    NormalizerSettings settings;
    settings.segmentation = segmentation;
    const TextNormalizer normalizer(settings);
    EXPECT_EQ(normalizer.tokenize("Where's my ORDER?!  It's late..."),
              (Tokens{"where's", "my", "order", "it's", "late"}));
    EXPECT_EQ(normalizer.tokenize("Price: 12.50 USD"), (Tokens{"price", "12.50", "usd"}));
    EXPECT_TRUE(normalizer.tokenize("?!…。，").empty());
  }
}

TEST(TextNormalizerTest, KeepsPunctuationWhenAsked) {
  NormalizerSettings settings;
  settings.drop_punctuation = false;
  EXPECT_EQ(TextNormalizer(settings).tokenize("refund?"), (Tokens{"refund", "?"}));
}

TEST(TextNormalizerTest, SettingsRoundTripThroughJson) {
  NormalizerSettings settings;
  settings.segmentation = Segmentation::kIcuWord;
  settings.drop_punctuation = false;
  auto parsed = NormalizerSettings::from_json(settings.to_json(), "normalizer.json");
  ASSERT_TRUE(parsed) << parsed.error().message;
  EXPECT_EQ(parsed->segmentation, Segmentation::kIcuWord);
  EXPECT_FALSE(parsed->drop_punctuation);
  EXPECT_TRUE(parsed->case_fold);
}

TEST(TextNormalizerTest, SettingsRejectUnknownVersionAndSegmentation) {
  nlohmann::json json = NormalizerSettings{}.to_json();
  json["version"] = 2;
  auto bad_version = NormalizerSettings::from_json(json, "dir/normalizer.json");
  ASSERT_FALSE(bad_version);
  EXPECT_NE(bad_version.error().message.find("dir/normalizer.json"), std::string::npos);
  EXPECT_NE(bad_version.error().message.find("version"), std::string::npos);

  json = NormalizerSettings{}.to_json();
  json["segmentation"] = "jieba";
  auto bad_segmentation = NormalizerSettings::from_json(json, "normalizer.json");
  ASSERT_FALSE(bad_segmentation);
  EXPECT_NE(bad_segmentation.error().message.find("segmentation"), std::string::npos);
}

}  // namespace
}  // namespace hengshi::edge
