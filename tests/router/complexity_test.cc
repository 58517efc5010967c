#include "router/complexity.h"

#include <gtest/gtest.h>

#include <array>
#include <string>
#include <vector>

namespace hengshi::router {
namespace {

int score_of(std::string_view text, int turns = 1) {
  return complexity_score(complexity_features(text, turns));
}

TEST(ComplexityTest, ApproxTokenCount) {
  EXPECT_EQ(approx_token_count(""), 0);
  EXPECT_EQ(approx_token_count("abcd"), 1);
  EXPECT_EQ(approx_token_count("abcde"), 2);
  EXPECT_EQ(approx_token_count("你好"), 2);
  EXPECT_EQ(approx_token_count("你好，世界。"), 6);  // CJK punctuation counts as CJK
  EXPECT_EQ(approx_token_count("你好abcd"), 3);
  EXPECT_EQ(approx_token_count("こんにちは"), 5);
  EXPECT_EQ(approx_token_count("안녕"), 2);
  EXPECT_EQ(approx_token_count("é"), 1);         // 2 bytes of non-CJK text
  EXPECT_EQ(approx_token_count("\xE4\xBD"), 1);  // truncated UTF-8: 2 stray bytes
}

TEST(ComplexityTest, CountsCharactersSentencesAndQuestions) {
  const ComplexityFeatures features =
      complexity_features("你好。What is pi? It is 3.14, right?? 谢谢！\nbye", 3);
  EXPECT_EQ(features.chars, 42);
  EXPECT_EQ(features.sentences, 5);  // 你好。|What is pi?|It is 3.14, right??|谢谢！|bye
  EXPECT_EQ(features.questions, 2);
  EXPECT_EQ(features.turns, 3);

  const ComplexityFeatures empty = complexity_features("", 0);
  EXPECT_EQ(empty.chars, 0);
  EXPECT_EQ(empty.sentences, 0);
  EXPECT_EQ(complexity_score(empty), 1);
}

// Plain ASCII takes a shorter way through the scan than white space, sentence ends, question
// marks and everything past ASCII: the counts must not tell the two apart.
TEST(ComplexityTest, PlainAsciiCountsAsEveryOtherCharacterDoes) {
  const std::string text = "one.two. three\ffour\vfive!six?!seven";
  const ComplexityFeatures features = complexity_features(text, 1);
  EXPECT_EQ(features.chars, static_cast<int>(text.size()));
  EXPECT_EQ(features.sentences, 4);  // one.two.|three four five!|six?|seven ("!" after "?" ends nothing)
  EXPECT_EQ(features.questions, 1);
  EXPECT_EQ(features.approx_tokens, approx_token_count(text));
  EXPECT_EQ(complexity_features("a?b?", 1).questions, 2) << "a letter ends a run of question marks";
  EXPECT_EQ(complexity_features("a??b", 1).questions, 1);
  EXPECT_EQ(complexity_features("x\xC2\xA0y.", 1).sentences, 1) << "U+00A0 is white space, not a break";
  EXPECT_EQ(complexity_features("x\xC2\xA0y.", 1).chars, 4);
}

// Prose is read eight bytes at a time inside a sentence: a sentence end, a question mark or a
// non-ASCII character at any offset of those eight bytes must count as it does byte by byte.
TEST(ComplexityTest, WordAtATimeScanCountsLikeTheByteScanAtEveryOffset) {
  for (int k = 0; k <= 17; ++k) {
    const std::string lead(static_cast<std::size_t>(k), 'x');
    const std::string text = "A" + lead + ". " + std::string(20, 'y') + " z?Then " + lead + "\nend";
    const ComplexityFeatures features = complexity_features(text, 1);
    EXPECT_EQ(features.chars, static_cast<int>(text.size())) << k;
    EXPECT_EQ(features.sentences, 4) << k;  // "A….", "yy… z?", "Then …\n", "end"
    EXPECT_EQ(features.questions, 1) << k;
    EXPECT_EQ(features.approx_tokens, static_cast<int>((text.size() + 3) / 4)) << k;
    EXPECT_EQ(approx_token_count(text), features.approx_tokens) << k;

    const std::string mixed = "Tell me" + lead + "你好 and more text after it";
    const ComplexityFeatures cjk = complexity_features(mixed, 1);
    EXPECT_EQ(cjk.chars, static_cast<int>(mixed.size()) - 4) << k;  // two 3-byte characters
    EXPECT_EQ(cjk.sentences, 1) << k;
    EXPECT_EQ(cjk.approx_tokens, 2 + static_cast<int>((mixed.size() - 6 + 3) / 4)) << k;
    EXPECT_EQ(approx_token_count(mixed), cjk.approx_tokens) << k;
  }
  EXPECT_EQ(complexity_features("Why is my parcel late and who? bbbbbbbbbbbbbbbb?", 1).questions, 2);
  EXPECT_EQ(complexity_features("a question?? bbbbbbbbbbbbbbbb", 1).questions, 1);
}

TEST(ComplexityTest, CountsDistinctReasoningAndConstraintCues) {
  // why, how, compare (compare and contrast are one concept), step by step.
  EXPECT_EQ(complexity_features("Why? How? Compare and contrast, step by step.", 1).reasoning_cues,
            4);
  // why (为什么 and 原因 are one concept), analyze, compare, difference.
  EXPECT_EQ(complexity_features("为什么会这样？请分析原因并比较两者的区别", 1).reasoning_cues, 4);
  EXPECT_EQ(complexity_features("why why why", 1).reasoning_cues, 1);
  EXPECT_EQ(complexity_features("however, show me", 1).reasoning_cues, 0);
  // format, length limit (at most and 50 words are one concept).
  EXPECT_EQ(complexity_features("answer in JSON, at most 50 words", 1).constraint_cues, 2);
  // must, format, length limit.
  EXPECT_EQ(complexity_features("必须以JSON格式输出，不超过300字", 1).constraint_cues, 3);
  EXPECT_EQ(complexity_features("thanks for the help", 1).constraint_cues, 0);
}

TEST(ComplexityTest, DetectsCodeAndMath) {
  EXPECT_TRUE(complexity_features("```\nx = 1\n```", 1).has_code);
  EXPECT_TRUE(complexity_features("#include <vector>\nint main() { return 0; }", 1).has_code);
  EXPECT_TRUE(complexity_features("def f(x):\n  return x", 1).has_code);
  EXPECT_TRUE(complexity_features("SELECT * FROM users", 1).has_code);
  EXPECT_FALSE(complexity_features("let me know how to select a plan", 1).has_code);
  EXPECT_FALSE(complexity_features("怎么修改密码", 1).has_code);

  EXPECT_TRUE(complexity_features("solve 2x + 3 = 7", 1).has_math);
  EXPECT_TRUE(complexity_features("what is 12*7", 1).has_math);
  EXPECT_TRUE(complexity_features("x^2 的导数是多少", 1).has_math);
  EXPECT_TRUE(complexity_features("∫ sin x dx", 1).has_math);
  EXPECT_FALSE(complexity_features("call 138-1234-5678 on 2023-11-29", 1).has_math);
  EXPECT_FALSE(complexity_features("how do I reset my PIN?", 1).has_math);
}

TEST(ComplexityTest, FaqLikeQuestionsScoreLow) {
  for (const std::string_view text :
       {"怎么修改密码", "how do I reset my PIN?", "营业时间是几点？",
        "What are your opening hours?", "如何开通网银", "我的快递到哪了", "信用卡怎么还款？",
        "Why was my card declined?", "我的银行卡被冻结了怎么办？为什么会这样？"}) {
    EXPECT_LE(score_of(text), 2) << text;
  }
}

TEST(ComplexityTest, AnalyticalRequestsScoreHigh) {
  for (const std::string_view text :
       {"compare X and Y, explain the trade-offs step by step and give a table",
        "请比较A方案和B方案的区别，分析各自的优缺点，并一步一步解释推导过程，最后以表格格式输出，"
        "不超过300字。",
        "```python\ndef f(x): return x*2\n```\nWhy does this fail with a TypeError? Explain step "
        "by step and compare it with the JavaScript version.",
        "Prove that the sum of the first n odd numbers is n^2, then derive a closed form for the "
        "sum of squares and explain why the method works."}) {
    EXPECT_GE(score_of(text), 4) << text;
  }
}

TEST(ComplexityTest, AddingCuesNeverLowersTheScore) {
  const std::vector<std::string> additions = {
      " Also compare it with the old one.",    " Why is it different?",
      " Explain the trade-offs step by step.", " Give the answer as a table in JSON.",
      " It must be at most 200 words.",        " Here is my code: ```x = 1 + 2```",
      " 请分析原因并推导公式 x^2 + y^2 = 1。"};
  for (const std::string base : {"how do I reset my PIN?", "怎么修改密码"}) {
    std::string text = base;
    int previous = score_of(text);
    for (const std::string& addition : additions) {
      text += addition;
      const int score = score_of(text);
      EXPECT_GE(score, previous) << text;
      previous = score;
    }
    EXPECT_GE(previous, 4) << text;
  }
}

TEST(ComplexityTest, ScoreIsMonotoneInEveryFeatureAndBounded) {
  // Walk each feature up from a few starting points; the score never drops and stays in 1..5.
  const std::array<int ComplexityFeatures::*, 6> counts = {
      &ComplexityFeatures::approx_tokens,   &ComplexityFeatures::sentences,
      &ComplexityFeatures::questions,       &ComplexityFeatures::reasoning_cues,
      &ComplexityFeatures::constraint_cues, &ComplexityFeatures::turns};
  const std::array<bool ComplexityFeatures::*, 2> flags = {&ComplexityFeatures::has_code,
                                                           &ComplexityFeatures::has_math};
  const std::vector<ComplexityFeatures> starts = {
      {}, {40, 30, 2, 1, 1, 0, false, false, 1}, {400, 300, 6, 3, 4, 2, true, false, 8}};
  for (const ComplexityFeatures& start : starts) {
    const int start_score = complexity_score(start);
    EXPECT_GE(start_score, 1);
    for (int ComplexityFeatures::*count : counts) {
      ComplexityFeatures features = start;
      int previous = start_score;
      for (int step = 0; step < 40; ++step) {
        features.*count += 13;
        const int score = complexity_score(features);
        EXPECT_GE(score, previous);
        EXPECT_LE(score, 5);
        previous = score;
      }
    }
    for (bool ComplexityFeatures::*flag : flags) {
      ComplexityFeatures features = start;
      features.*flag = true;
      EXPECT_GE(complexity_score(features), start_score);
    }
  }
  const ComplexityFeatures everything = {5000, 4000, 50, 10, 10, 10, true, true, 30};
  EXPECT_EQ(complexity_score(everything), 5);
}

TEST(ComplexityTest, LongConversationsAddPoints) {
  const std::string text = "compare X and Y and explain why";
  EXPECT_GT(score_of(text, 20), score_of(text, 1));
}

}  // namespace
}  // namespace hengshi::router
