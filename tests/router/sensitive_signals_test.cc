#include "router/sensitive_signals.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace hengshi::router {
namespace {

using ::testing::HasSubstr;
using ::testing::Optional;

SensitiveSignals signals(std::vector<SensitiveRule> rules) {
  auto created = SensitiveSignals::create(std::move(rules));
  EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error().message);
  return std::move(created).value();
}

// The config error for `rules`, or "" if it was accepted.
std::string error_of(std::vector<SensitiveRule> rules) {
  const auto created = SensitiveSignals::create(std::move(rules));
  if (created.ok()) return "";
  EXPECT_EQ(created.error().code, "config_invalid");
  return created.error().message;
}

std::optional<std::string> rule_hit(const SensitiveSignals& matcher, std::string_view text) {
  const auto hit = matcher.match(text);
  return hit ? std::optional<std::string>(hit->rule) : std::nullopt;
}

TEST(SensitiveSignalsTest, DefaultsAreValidAndInOrder) {
  const SensitiveSignals matcher = signals(SensitiveSignals::defaults());
  ASSERT_EQ(matcher.rules().size(), 3u);
  EXPECT_EQ(matcher.rules()[0].name, "complaint");
  EXPECT_EQ(matcher.rules()[0].target, "human");
  EXPECT_EQ(matcher.rules()[1].name, "human_handoff");
  EXPECT_EQ(matcher.rules()[1].target, "human");
  EXPECT_EQ(matcher.rules()[2].name, "fraud_security");
  EXPECT_EQ(matcher.rules()[2].target, "cloud-large");
}

TEST(SensitiveSignalsTest, DefaultsHitChineseText) {
  const SensitiveSignals matcher = signals(SensitiveSignals::defaults());
  EXPECT_THAT(matcher.match("你们的服务太差了，我要投诉！"),
              Optional(SignalMatch{"complaint", "human", "投诉"}));
  EXPECT_THAT(matcher.match("帮我转人工"),
              Optional(SignalMatch{"human_handoff", "human", "转人工"}));
  // Both 盗刷 and 被盗 hit; the rule's first keyword in config order is reported.
  EXPECT_THAT(matcher.match("我的卡被盗刷了"),
              Optional(SignalMatch{"fraud_security", "cloud-large", "盗刷"}));
  EXPECT_EQ(rule_hit(matcher, "接到一个诈骗电话"), "fraud_security");
}

TEST(SensitiveSignalsTest, DefaultsHitEnglishTextCaseInsensitively) {
  const SensitiveSignals matcher = signals(SensitiveSignals::defaults());
  EXPECT_THAT(matcher.match("I want to SPEAK TO A HUMAN now"),
              Optional(SignalMatch{"human_handoff", "human", "speak to a human"}));
  EXPECT_THAT(matcher.match("This is Fraud!"),
              Optional(SignalMatch{"fraud_security", "cloud-large", "fraud"}));
  EXPECT_EQ(rule_hit(matcher, "my account was Hacked yesterday"), "fraud_security");
  EXPECT_EQ(rule_hit(matcher, "I'd like to file a complaint."), "complaint");
  EXPECT_EQ(rule_hit(matcher, "can I talk to\n a   human please"), "human_handoff");
  EXPECT_EQ(rule_hit(matcher, "我要complaint"), "complaint");  // CJK neighbours are boundaries
}

TEST(SensitiveSignalsTest, DefaultsLeaveOrdinaryRequestsAlone) {
  const SensitiveSignals matcher = signals(SensitiveSignals::defaults());
  for (const std::string_view text :
       {"", "今天天气怎么样", "怎么修改密码", "how do I reset my PIN?", "humanity and humans",
        "the defraudation case study", "scampi recipe", "人工智能是什么"}) {
    EXPECT_EQ(matcher.match(text), std::nullopt) << text;
  }
}

TEST(SensitiveSignalsTest, EnglishKeywordsMatchWholeWordsWithPlurals) {
  const SensitiveSignals matcher = signals({{"agent", {"agent"}, {}, "human"}});
  EXPECT_TRUE(matcher.match("agent"));
  EXPECT_TRUE(matcher.match("Agent!"));
  EXPECT_TRUE(matcher.match("your agents are rude"));
  EXPECT_TRUE(matcher.match("找agent"));
  EXPECT_FALSE(matcher.match("travel agency"));
  EXPECT_FALSE(matcher.match("a reagent"));
  EXPECT_FALSE(matcher.match("agentive"));
}

TEST(SensitiveSignalsTest, CjkKeywordsArePlainSubstrings) {
  const SensitiveSignals matcher = signals({{"refund", {"退款"}, {}, "human"}});
  EXPECT_TRUE(matcher.match("我想申请退款谢谢"));
  EXPECT_TRUE(matcher.match("退款"));
  EXPECT_FALSE(matcher.match("退货"));
}

TEST(SensitiveSignalsTest, KeywordsAreLiteralText) {
  const SensitiveSignals matcher = signals({{"plus", {"c++ (urgent)"}, {}, "human"}});
  EXPECT_TRUE(matcher.match("a C++ (URGENT) question"));
  EXPECT_FALSE(matcher.match("c urgent"));
}

TEST(SensitiveSignalsTest, FirstRuleInConfigOrderWins) {
  const std::vector<SensitiveRule> rules = {
      {"first", {"card"}, {}, "cloud-large"},
      {"second", {"card", "stolen"}, {}, "human"},
  };
  const SensitiveSignals matcher = signals(rules);
  EXPECT_THAT(matcher.match("my card"), Optional(SignalMatch{"first", "cloud-large", "card"}));
  // "stolen" comes first in the text, but rule order decides.
  EXPECT_THAT(matcher.match("stolen: my card"),
              Optional(SignalMatch{"first", "cloud-large", "card"}));
  EXPECT_THAT(matcher.match("stolen"), Optional(SignalMatch{"second", "human", "stolen"}));
}

TEST(SensitiveSignalsTest, PatternsReportTheirText) {
  const std::string pattern = R"(订单\d{6,})";
  const SensitiveSignals matcher =
      signals({{"order_dispute", {"拒付"}, {pattern, "(?i)charge ?back"}, "human"}});
  EXPECT_THAT(matcher.match("订单20231129有问题"),
              Optional(SignalMatch{"order_dispute", "human", pattern}));
  EXPECT_THAT(matcher.match("I will file a ChargeBack"),
              Optional(SignalMatch{"order_dispute", "human", "(?i)charge ?back"}));
  EXPECT_EQ(matcher.match("订单123"), std::nullopt);
  // A keyword of the rule comes before its patterns.
  EXPECT_THAT(matcher.match("订单20231129 拒付"),
              Optional(SignalMatch{"order_dispute", "human", "拒付"}));
}

TEST(SensitiveSignalsTest, NoRulesMatchNothing) {
  const SensitiveSignals matcher = signals({});
  EXPECT_TRUE(matcher.rules().empty());
  EXPECT_EQ(matcher.match("投诉 fraud"), std::nullopt);
}

TEST(SensitiveSignalsTest, ConfigErrorsNameTheField) {
  EXPECT_EQ(error_of({{"", {"a"}, {}, "human"}}), "sensitive[0] ().name: must not be empty");
  EXPECT_EQ(error_of({{"a", {"x"}, {}, "human"}, {"a", {"y"}, {}, "human"}}),
            "sensitive[1] (a).name: duplicate of sensitive[0]");
  EXPECT_EQ(error_of({{"ok", {"a"}, {}, "human"}, {"bad", {"b"}, {}, "cloud"}}),
            "sensitive[1] (bad).target: must be \"human\" or \"cloud-large\", got \"cloud\"");
  EXPECT_EQ(error_of({{"empty", {}, {}, "human"}}),
            "sensitive[0] (empty).keywords: a rule needs at least one keyword or pattern");
  EXPECT_EQ(error_of({{"blank", {"ok", " \t"}, {}, "human"}}),
            "sensitive[0] (blank).keywords[1]: must not be empty");
  EXPECT_THAT(error_of({{"regex", {}, {"fine", "(unclosed"}, "human"}}),
              HasSubstr("sensitive[0] (regex).patterns[1]: "));
  EXPECT_EQ(error_of({{"greedy", {}, {".*"}, "human"}}),
            "sensitive[0] (greedy).patterns[0]: matches the empty string");
  EXPECT_EQ(error_of({{"fine", {"a"}, {"b+"}, "cloud-large"}}), "");
}

TEST(SensitiveSignalsTest, RulesAreKeptAsConfigured) {
  const std::vector<SensitiveRule> rules = {{"spaced", {"  speak to a human  "}, {}, "human"}};
  const SensitiveSignals matcher = signals(rules);
  EXPECT_EQ(matcher.rules()[0].keywords[0], "  speak to a human  ");
  EXPECT_THAT(matcher.match("speak to a human"),
              Optional(SignalMatch{"spaced", "human", "  speak to a human  "}));
}

// The router's one pass (the signal and the complexity cues from one set) must read a text
// exactly as the two separate passes do.
TEST(SensitiveSignalsTest, OnePassGivesTheSignalAndTheComplexityCues) {
  const SensitiveSignals defaults = signals(SensitiveSignals::defaults());
  const SensitiveSignals none = signals({});
  std::string long_text;
  for (int i = 0; i < 4000; ++i)
    long_text += "Why must x = 2 * y? 为什么要投诉 step by step, at most 50 words. ";
  const std::vector<std::string> texts = {
      "",
      "Hi, my parcel has not arrived yet, order 12345. Can you check where it is?",
      "Why? How? Compare and contrast, step by step, in JSON.",
      "I want to file a complaint: why was I charged twice?",
      "我要投诉！为什么扣了两次钱，请分析原因",
      "def f(x):\n  return x ** 2;\n and solve the equation 3x + 1 = 7",
      "someone hacked my account, explain what to do",
      long_text,
  };
  for (const std::string& text : texts) {
    SCOPED_TRACE(text.substr(0, 60));
    for (const SensitiveSignals* matcher : {&defaults, &none}) {
      ComplexityFeatures one_pass = complexity_features_without_cues(text, 3);
      const std::optional<SignalMatch> signal = matcher->match(text, one_pass);
      EXPECT_EQ(one_pass, complexity_features(text, 3));
      EXPECT_EQ(signal, matcher->match(text));
    }
  }
  // The cases above do exercise both halves.
  ComplexityFeatures features = complexity_features_without_cues(texts[3], 1);
  EXPECT_THAT(defaults.match(texts[3], features),
              Optional(SignalMatch{"complaint", "human", "complaint"}));
  EXPECT_GE(features.reasoning_cues, 1);
  ComplexityFeatures plain = complexity_features_without_cues(texts[1], 1);
  EXPECT_EQ(defaults.match(texts[1], plain), std::nullopt);
  EXPECT_EQ(plain.reasoning_cues + plain.constraint_cues, 0);
}

}  // namespace
}  // namespace hengshi::router
