// Training rows for `hengshi finetune`: the three row shapes, FAQ answers by intent, the
// held-out split, window packing with answer-only labels, and the answer score.
#include "edge/finetune_data.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "edge/answer_score.h"
#include "edge/finetune_windows.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

class FinetuneDataTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hengshi-finetune-data-" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string write(const std::string& text) {
    const fs::path path = dir_ / "rows.jsonl";
    std::ofstream(path) << text;
    return path.string();
  }
  fs::path dir_;
};

TEST_F(FinetuneDataTest, ReadsTheThreeShapesAndResolvesFaqAnswersByIntent) {
  auto data = read_finetune_rows(write(
      R"({"text": "where is my order", "intent": "order_status"})" "\n"
      R"({"text": "track order", "intent": "order_status", "answer": "See My Orders."})" "\n"
      R"({"text": "hi", "answer": "Hello."})" "\n"
      R"({"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "ping"}, {"role": "assistant", "content": [{"type": "text", "text": "pong"}]}]})" "\n"
      R"({"text": "chit chat", "intent": "no_answer_anywhere"})" "\n"));
  ASSERT_TRUE(data.ok()) << data.error().message;
  ASSERT_EQ(data->rows.size(), 4u);
  EXPECT_EQ(data->skipped_without_answer, 1u);
  // File order, whatever the shape; the FAQ row before its intent's answer row gets it too.
  EXPECT_EQ(data->rows[0].line, 1u);
  EXPECT_EQ(data->rows[0].answer(), "See My Orders.");
  EXPECT_EQ(data->rows[0].prompt().back().text, "where is my order");
  EXPECT_EQ(data->rows[2].answer(), "Hello.");
  ASSERT_EQ(data->rows[3].messages.size(), 3u);
  EXPECT_EQ(data->rows[3].messages[0].role, "system");
  EXPECT_EQ(data->rows[3].answer(), "pong");
}

TEST_F(FinetuneDataTest, OutOfScopeRowsAreKeptForTheGateOrTrainedToRefuse) {
  // Without a refusal answer the __oos__ rows cannot be learned, but the gate asks them.
  auto unanswered = read_finetune_rows(write(
      R"({"text": "where is my order", "intent": "order_status", "answer": "See My Orders."})" "\n"
      R"({"text": "tell me a joke", "intent": "__oos__"})" "\n"));
  ASSERT_TRUE(unanswered.ok()) << unanswered.error().message;
  EXPECT_EQ(unanswered->rows.size(), 1u);
  EXPECT_EQ(unanswered->skipped_without_answer, 0u);
  ASSERT_EQ(unanswered->out_of_scope.size(), 1u);
  EXPECT_EQ(unanswered->out_of_scope[0].prompt().back().text, "tell me a joke");
  EXPECT_EQ(unanswered->rows[0].intent, "order_status");
  // With one, every __oos__ row is trained to refuse.
  auto answered = read_finetune_rows(write(
      R"({"text": "where is my order", "intent": "order_status", "answer": "See My Orders."})" "\n"
      R"({"text": "tell me a joke", "intent": "__oos__"})" "\n"
      R"({"text": "weather today", "intent": "__oos__", "answer": "Sorry, I cannot help with that."})" "\n"));
  ASSERT_TRUE(answered.ok());
  EXPECT_TRUE(answered->out_of_scope.empty());
  ASSERT_EQ(answered->rows.size(), 3u);
  EXPECT_EQ(answered->rows[1].answer(), "Sorry, I cannot help with that.");
}

TEST_F(FinetuneDataTest, BadRowsNameTheLine) {
  auto bad_json = read_finetune_rows(write("{\"text\": \"a\", \"answer\": \"b\"}\n{oops\n"));
  ASSERT_FALSE(bad_json.ok());
  EXPECT_NE(bad_json.error().message.find(":2"), std::string::npos) << bad_json.error().message;

  auto no_answer = read_finetune_rows(write(
      R"({"messages": [{"role": "user", "content": "q"}, {"role": "user", "content": "q2"}]})" "\n"));
  ASSERT_FALSE(no_answer.ok());
  EXPECT_NE(no_answer.error().message.find("assistant"), std::string::npos);

  auto bad_role = read_finetune_rows(write(
      R"({"messages": [{"role": "tool", "content": "q"}, {"role": "assistant", "content": "a"}]})" "\n"));
  ASSERT_FALSE(bad_role.ok());
  EXPECT_NE(bad_role.error().message.find("tool"), std::string::npos);

  auto nothing = read_finetune_rows(write(R"({"text": "q", "intent": "x"})" "\n"));
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.error().code, "data_invalid");
}

std::vector<FinetuneRow> faq_rows(int answers, int per_answer) {
  std::vector<FinetuneRow> rows;
  for (int a = 0; a < answers; ++a) {
    for (int q = 0; q < per_answer; ++q) {
      FinetuneRow row;
      row.line = rows.size() + 1;
      row.messages = {{"user", "q" + std::to_string(a) + "-" + std::to_string(q)},
                      {"assistant", "answer " + std::to_string(a)}};
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(FinetuneSplitTest, HoldsOutParaphrasesButKeepsEveryAnswerTrained) {
  auto rows = faq_rows(5, 4);
  FinetuneRow single;
  single.messages = {{"user", "lonely"}, {"assistant", "only one row"}};
  rows.push_back(single);
  const auto split = split_heldout(rows, 0.25, 7);
  EXPECT_EQ(split.heldout.size(), 5u);  // one of each group of 4; the single row stays
  EXPECT_EQ(split.train.size() + split.heldout.size(), rows.size());
  std::set<std::string> trained;
  for (const auto& row : split.train) trained.insert(row.answer());
  for (const auto& row : split.heldout) EXPECT_TRUE(trained.contains(row.answer()));
  EXPECT_TRUE(trained.contains("only one row"));

  // The same seed gives the same split; another seed another.
  const auto again = split_heldout(rows, 0.25, 7);
  const auto other = split_heldout(rows, 0.25, 8);
  std::vector<std::string> a, b, c;
  for (const auto& row : split.heldout) a.push_back(row.prompt().back().text);
  for (const auto& row : again.heldout) b.push_back(row.prompt().back().text);
  for (const auto& row : other.heldout) c.push_back(row.prompt().back().text);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_TRUE(split_heldout(rows, 0.0, 7).heldout.empty());
}

TEST(SeededOrderTest, IsAFixedSequence) {
  // splitmix64's published first output for seed 0: the order is the same on every platform.
  SeededOrder order(0);
  EXPECT_EQ(order.next(), 0xE220A8397B1DCDAFULL);
}

TEST(FinetuneWindowsTest, LabelsOnlyAnswerTokensAndGivesEachRowItsOwnWindow) {
  // Row 1: prompt {1,2,3}, answer {4,5}; row 2: prompt {6}, answer {7,8,9}.
  std::vector<TokenizedRow> rows = {{{1, 2, 3, 4, 5}, 3}, {{6, 7, 8, 9}, 1}};
  auto packed = pack_windows(rows, 8, 0);
  ASSERT_TRUE(packed.ok()) << packed.error().message;
  // Each row starts a window of its own.
  ASSERT_EQ(packed->count, 2u);
  const std::vector<std::int32_t> tokens = {1, 2, 3, 4, 5, 0, 0, 0, 6, 7, 8, 9, 0, 0, 0, 0};
  const std::vector<std::int32_t> labels = {-1, -1, 4, 5, -1, -1, -1, -1,
                                            7,  8,  9, -1, -1, -1, -1, -1};
  EXPECT_EQ(packed->tokens, tokens);
  EXPECT_EQ(packed->labels, labels);
  EXPECT_EQ(packed->label_positions, 5u);

  // Room for both in one window, yet each has its own: no row can see another's answer.
  auto roomy = pack_windows(rows, 9, 0);
  ASSERT_TRUE(roomy.ok());
  EXPECT_EQ(roomy->count, 2u);
  EXPECT_EQ(roomy->tokens[9], 6);
  for (std::size_t i = 5; i < 9; ++i) EXPECT_EQ(roomy->labels[i], -1) << "padding carries no loss";
  // Packed on request: both rows in one window.
  auto packed_together = pack_windows(rows, 9, 0, /*pack=*/true);
  ASSERT_TRUE(packed_together.ok());
  EXPECT_EQ(packed_together->count, 1u);
  EXPECT_EQ(packed_together->tokens[5], 6);

  auto too_long = pack_windows(rows, 4, 0);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("row 1"), std::string::npos);
  EXPECT_FALSE(pack_windows({{{1, 2}, 2}}, 8, 0).ok());  // no answer token
}

TEST(AnswerScoreTest, MixedSegmentationF1) {
  EXPECT_DOUBLE_EQ(char_f1("退款 1–3 个工作日到账。Refunds take 3 days.",
                           "退款1–3个工作日到账 refunds TAKE 3 days"), 1.0);
  EXPECT_DOUBLE_EQ(char_f1("完全不同", "abc def"), 0.0);
  // Two of three tokens right (订, 单; not cancel/refund): precision = recall = 2/3.
  EXPECT_NEAR(char_f1("订单 cancel", "订单 refund"), 2.0 / 3.0, 1e-9);
  // English letters alone do not score: "thereof" is one token, not the letters of "the".
  EXPECT_DOUBLE_EQ(char_f1("thereof", "the"), 0.0);
  EXPECT_DOUBLE_EQ(char_f1("", ""), 1.0);
  EXPECT_DOUBLE_EQ(char_f1("", "答案"), 0.0);
  const auto segments = mixed_segments("我的Order 12号!");
  EXPECT_EQ(segments, (std::vector<std::string>{"我", "的", "order", "12", "号"}));
}

}  // namespace
}  // namespace hengshi::edge
