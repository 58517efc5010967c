#include "cache/hit_guards.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "edge/text_normalizer.h"

namespace hengshi::cache {
namespace {

// The guard that refuses `cached`'s answer for `query`, on the normalised forms the cache uses.
std::optional<Guard> rejects(std::string_view query, std::string_view cached) {
  static const edge::TextNormalizer normalizer;
  return guard_rejects(guard_features(normalizer.normalize(query)), guard_features(normalizer.normalize(cached)));
}

TEST(HitGuardsTest, ANegationOnOneSideIsRefusedInChineseAndEnglish) {
  for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{
           {"我的订单已经发货了", "我的订单还没发货"},
           {"可以退款吗", "不可以退款吗"},
           {"这个套餐收费吗", "这个套餐免费吗"},
           {"申请撤销了吗", "申请了吗"},
           {"帮我开通会员", "帮我取消会员"},
           {"订单未支付怎么办", "订单支付怎么办"},
           {"Can I get a refund?", "Can I not get a refund?"},
           {"Why is my card working?", "Why isn't my card working?"},
           {"I have received the parcel", "I never received the parcel"},
           {"Is there a fee", "Is there no fee"}}) {
    EXPECT_EQ(rejects(a, b), Guard::polarity) << a << " / " << b;
    EXPECT_EQ(rejects(b, a), Guard::polarity) << b << " / " << a;
  }
}

TEST(HitGuardsTest, FlippedDirectionsAreRefused) {
  for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{
           {"怎么打开自动续费", "怎么关闭自动续费"},
           {"如何绑定银行卡", "如何解绑银行卡"},
           {"会员升级需要多少钱", "会员降级需要多少钱"},
           {"开灯", "关灯"},
           {"How do I enable two-factor login?", "How do I disable two-factor login?"},
           {"Turn the alerts on", "Turn the alerts off"},
           {"How to increase my limit", "How to decrease my limit"},
           {"add a card to my account", "remove a card from my account"}}) {
    EXPECT_EQ(rejects(a, b), Guard::polarity) << a << " / " << b;
  }
}

TEST(HitGuardsTest, ParaphrasesWithTheSamePolarityPass) {
  for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{
           {"我的快递到哪了", "快递现在到哪里了"},
           {"怎么开通会员", "如何打开会员"},  // two ways to say open: no opposite sides
           {"这个非常好用吗", "这个好用吗"},   // 非常 is "very", not a negation
           {"关于退款的规定", "退款的规定是什么"},  // 关于 is "about"
           {"未来几天会发货吗", "最近几天会发货吗"},
           {"I did not receive my parcel", "my parcel never arrived, I didn't get it? no"},  // three vs three
           {"借款能不能用于信用卡还款", "借款可以用于信用卡还款吗"},  // 能不能 asks: A-not-A
           {"可以提前还款不", "我可以提前还款吗"},  // a clause-final 不 asks too
           {"这个没有违约金是什么意思", "免违约金是什么意思"},
           {"我的借呗怎么申请不成功", "我的借呗为什么申请不过"},  // 不过 after a verb: "not pass"
           {"How do I reset my password", "how can i reset my password"}}) {
    EXPECT_EQ(rejects(a, b), std::nullopt) << a << " / " << b;
  }
}

TEST(HitGuardsTest, DifferentNumbersDatesAmountsIdsAndDomainsAreRefused) {
  for (const auto& [a, b] : std::vector<std::pair<const char*, const char*>>{
           {"订单12345到哪了", "订单12354到哪了"},
           {"我要退3件", "我要退5件"},
           {"我要退两件", "我要退三件"},
           {"第一期账单", "第二期账单"},
           {"2024-05-01的订单", "2024-06-01的订单"},
           {"转账1,000元手续费多少", "转账10,000元手续费多少"},
           {"refund order AB1234", "refund order AB1243"},
           {"Is 3.5% the rate?", "Is 4.5% the rate?"},
           {"my email is on example.com, reset me@example.com", "my email is on example.com, reset me@example.org"},
           {"charge of $20", "charge of $200"}}) {
    EXPECT_EQ(rejects(a, b), Guard::numbers) << a << " / " << b;
  }
  // The same numbers in other words pass; Chinese and Arabic numerals compare by value.
  EXPECT_EQ(rejects("我要退两件", "我想退2件"), std::nullopt);
  EXPECT_EQ(rejects("第十五期", "第15期"), std::nullopt);
  EXPECT_EQ(rejects("订单12345到哪了", "请问订单12345现在在哪里"), std::nullopt);
  EXPECT_EQ(rejects("转账一万元", "转账10000元"), std::nullopt);
}

TEST(HitGuardsTest, ChineseNumeralsReadAsValues) {
  const auto features = guard_features("三万五千元 十五个 两千零八年 一百零五块 第二");
  EXPECT_EQ(features.numbers, (std::vector<std::string>{"35000", "15", "2008", "105", "2"}));
  // A numeral that is not a quantity (一下, 统一) is not a number.
  EXPECT_TRUE(guard_features("看一下 统一 一些").numbers.empty());
}

TEST(HitGuardsTest, StackedMultipliersSaturateInsteadOfOverflowing) {
  // Found by hit_guards_fuzz: 千亿亿… multiplied past int64 (undefined behaviour under UBSan).
  const auto features = guard_features("千亿亿亿亿元 五千亿亿元");
  ASSERT_EQ(features.numbers.size(), 2U);
  EXPECT_EQ(features.numbers[0], std::to_string(std::numeric_limits<std::int64_t>::max()));
  EXPECT_EQ(features.numbers[1], std::to_string(std::numeric_limits<std::int64_t>::max()));
}

}  // namespace
}  // namespace hengshi::cache
