// The edge LLM's promotion history (edge_history.h): lines round-trip, the serving state and the
// rollback target follow the stack of changes that took, refused attempts change nothing, a line
// cut short at the end is skipped and any other bad line is refused with file:line. And the live
// slot (llm_slot.h): a swap keeps what served as previous, a swap back restores it, and a reader
// holding the old version keeps it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "edge/edge_history.h"
#include "edge/llm_slot.h"
#include "obs/metrics.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

class EdgeHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (fs::temp_directory_path() / ("edge-history-" + std::to_string(::getpid()) + "-" +
                                          ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".jsonl"))
                .string();
    fs::remove(path_);
  }
  void TearDown() override { fs::remove(path_); }

  static ServingState state(const std::string& adapter_version) {
    ServingState s;
    s.model_path = "/models/base.gguf";
    if (!adapter_version.empty()) s.adapters["faq"] = {"/models/faq-" + adapter_version, 1.0, adapter_version};
    return s;
  }
  static HistoryEntry change(const std::string& action, const std::string& result, const ServingState& from,
                             const ServingState& to) {
    HistoryEntry entry;
    entry.at = "2026-12-02T05:00:00Z";
    entry.by = "ops";
    entry.action = action;
    entry.result = result;
    entry.from = from;
    entry.to = to;
    return entry;
  }
  std::string path_;
};

TEST_F(EdgeHistoryTest, AStateDescribesItselfAndRoundTrips) {
  ServingState s = state("v1");
  s.model_dir = "/models/full";
  s.model_version = "v0";
  EXPECT_EQ(s.describe(), "base.gguf@v0 + faq@v1");
  auto back = ServingState::from_json(s.to_json());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, s);
  EXPECT_FALSE(ServingState::from_json(nlohmann::json{{"adapters", {}}}));  // no model_path
  EXPECT_FALSE(ServingState::from_json(nlohmann::json{{"model_path", "m"}, {"adapters", {{"faq", 3}}}}));
}

TEST_F(EdgeHistoryTest, ServingAndRollbackFollowTheChangesThatTook) {
  auto history = EdgeHistory::open(path_);
  ASSERT_TRUE(history);
  EXPECT_FALSE(history->serving());
  EXPECT_FALSE(history->rollback_target());

  const auto base = state(""), v1 = state("v1"), v2 = state("v2");
  ASSERT_TRUE(history->append(change("promote", "promoted", base, v1)));
  HistoryEntry refused = change("promote", "refused", v1, v1);
  refused.gate = {{"passed", false}};
  refused.error = "worse";
  ASSERT_TRUE(history->append(refused));
  ASSERT_TRUE(history->append(change("promote", "promoted", v1, v2)));
  EXPECT_EQ(*history->serving(), v2);
  EXPECT_EQ(*history->rollback_target(), v1);

  // Read back from the file: the same answers, and the entries as written.
  auto reread = EdgeHistory::open(path_);
  ASSERT_TRUE(reread) << reread.error().message;
  ASSERT_EQ(reread->entries().size(), 3u);
  EXPECT_EQ(reread->entries()[1].error, "worse");
  EXPECT_EQ(reread->entries()[1].gate["passed"], false);
  EXPECT_EQ(*reread->serving(), v2);
  EXPECT_EQ(reread->last("promote")->to, v2);

  // Rolling back walks down the stack: v2 -> v1 -> base, then nothing is left.
  ASSERT_TRUE(reread->append(change("rollback", "rolled_back", v2, v1)));
  EXPECT_EQ(*reread->serving(), v1);
  EXPECT_EQ(*reread->rollback_target(), base);
  ASSERT_TRUE(reread->append(change("rollback", "rolled_back", v1, base)));
  EXPECT_EQ(*reread->serving(), base);
  EXPECT_FALSE(reread->rollback_target());
  EXPECT_EQ(reread->last("rollback")->to, base);
}

TEST_F(EdgeHistoryTest, ACutLastLineIsSkippedAndABadLineIsRefused) {
  {
    auto history = EdgeHistory::open(path_);
    ASSERT_TRUE(history->append(change("promote", "promoted", state(""), state("v1"))));
  }
  std::ofstream(path_, std::ios::app) << R"({"schema":1,"action":"prom)";  // a crash mid-write
  auto cut = EdgeHistory::open(path_);
  ASSERT_TRUE(cut) << cut.error().message;
  EXPECT_EQ(cut->entries().size(), 1u);

  std::ofstream(path_, std::ios::app) << "\n" << R"({"schema":1,"action":"promote"})" << "\n";
  auto bad = EdgeHistory::open(path_);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, "history_invalid");
  EXPECT_NE(bad.error().message.find(path_ + ":2"), std::string::npos) << bad.error().message;
}

TEST_F(EdgeHistoryTest, AnUnwritableHistoryIsAnError) {
  auto history = EdgeHistory::open("/nonexistent-dir/history.jsonl");
  ASSERT_TRUE(history);  // nothing to read yet
  auto appended = history->append(change("promote", "promoted", state(""), state("v1")));
  ASSERT_FALSE(appended);
  EXPECT_EQ(appended.error().code, "io_error");
  EXPECT_TRUE(history->entries().empty());
}

std::shared_ptr<const LlmServing> serving(const ServingState& state) {
  auto s = std::make_shared<LlmServing>();
  s->state = state;
  return s;
}

TEST_F(EdgeHistoryTest, TheSlotSwapsAndKeepsWhatServedForAnInstantSwapBack) {
  const auto base = serving(state("")), v1 = serving(state("v1"));
  LlmSlot slot(base);
  EXPECT_EQ(slot.current(), base);
  EXPECT_EQ(slot.previous(), nullptr);
  EXPECT_FALSE(slot.swap_back());

  const auto held = slot.current();  // a generation in flight
  slot.swap_in(v1);
  EXPECT_EQ(slot.current(), v1);
  EXPECT_EQ(slot.previous(), base);
  EXPECT_EQ(held, base);  // what it started with stays alive under it

  const std::string metrics = obs::Registry::global().render();
  EXPECT_NE(metrics.find(R"(hengshi_edge_llm_model_info{model="base.gguf",adapter="faq",version="v1"} 1)"),
            std::string::npos);
  ASSERT_TRUE(slot.swap_back());
  EXPECT_EQ(slot.current(), base);
  EXPECT_EQ(slot.previous(), nullptr);
  EXPECT_NE(obs::Registry::global().render().find(
                R"(hengshi_edge_llm_model_info{model="base.gguf",adapter="faq",version="v1"} 0)"),
            std::string::npos);
}

TEST_F(EdgeHistoryTest, WithoutKeepPreviousTheReplacedVersionIsFreedOnceItsLastReaderEnds) {
  std::weak_ptr<const LlmServing> base_alive;
  LlmSlot slot(serving(state("")), /*keep_previous=*/false);
  base_alive = slot.current();
  auto held = slot.current();  // a generation in flight
  slot.swap_in(serving(state("v1")));
  EXPECT_EQ(slot.previous(), nullptr);
  EXPECT_FALSE(slot.swap_back()) << "nothing kept: a rollback must load";
  EXPECT_FALSE(base_alive.expired()) << "the generation in flight keeps its version";
  held.reset();
  EXPECT_TRUE(base_alive.expired()) << "one version in memory once it ends";
  EXPECT_EQ(slot.current()->state, state("v1"));
}

}  // namespace
}  // namespace hengshi::edge
