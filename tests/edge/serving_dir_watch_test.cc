// ServingDirWatch: a serving directory rewritten with another version is reported once it has
// stood still for a poll, once per change; a rewrite with the same version, an untouched
// directory and a directory still being written are not; an unreadable manifest is reported
// (the promotion refuses it with the reason); a change not marked tried comes back.
#include "edge/serving_dir_watch.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/child_process.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

class ServingDirWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = hengshi::testing::temp_path("serving-dir-watch");
    fs::create_directories(dir_);
    write_version("v1", "adapter bytes v1");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // What `hengshi finetune` leaves: the file and a manifest naming the version.
  void write_version(const std::string& version, const std::string& bytes, const std::string& padding = "") {
    std::ofstream(dir_ + "/adapter.gguf", std::ios::trunc) << bytes;
    std::ofstream(dir_ + "/manifest.json", std::ios::trunc) << R"({"model_version": ")" << version << "\"}"
                                                            << padding;
  }
  ServingState serving(const std::string& version) const {
    ServingState state;
    state.model_path = "base.gguf";
    state.adapters["faq"] = {dir_, 1.0, version};
    return state;
  }

  std::string dir_;
};

TEST_F(ServingDirWatchTest, ARewriteIsReportedOnceItStandsStillAndOncePerChange) {
  ServingDirWatch watch;
  EXPECT_TRUE(watch.poll(serving("v1")).empty()) << "first sight: what serves was loaded from it";
  EXPECT_TRUE(watch.poll(serving("v1")).empty()) << "unchanged";

  write_version("v2", "adapter bytes, version two");
  EXPECT_TRUE(watch.poll(serving("v1")).empty()) << "changed, but not yet seen standing still";
  auto changes = watch.poll(serving("v1"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].task, "faq");
  EXPECT_EQ(changes[0].dir, dir_);
  EXPECT_EQ(changes[0].version, "v2");

  // Not marked tried (another change was running): reported again.
  ASSERT_EQ(watch.poll(serving("v1")).size(), 1u);
  watch.tried(changes[0]);
  EXPECT_TRUE(watch.poll(serving("v1")).empty()) << "tried (refused, say): not again until it changes";
  EXPECT_TRUE(watch.poll(serving("v2")).empty()) << "promoted: v2 serves";
}

TEST_F(ServingDirWatchTest, ADirectoryStillBeingWrittenWaits) {
  ServingDirWatch watch;
  (void)watch.poll(serving("v1"));
  write_version("v2", "partial");
  EXPECT_TRUE(watch.poll(serving("v1")).empty());
  write_version("v2", "partial, then more bytes");
  EXPECT_TRUE(watch.poll(serving("v1")).empty()) << "it moved since the last poll";
  ASSERT_EQ(watch.poll(serving("v1")).size(), 1u);
}

TEST_F(ServingDirWatchTest, TheSameVersionRewrittenIsNothingNew) {
  ServingDirWatch watch;
  (void)watch.poll(serving("v1"));
  write_version("v1", "adapter bytes v1", "\n\n");
  EXPECT_TRUE(watch.poll(serving("v1")).empty());
  EXPECT_TRUE(watch.poll(serving("v1")).empty());
  EXPECT_TRUE(watch.poll(serving("v1")).empty());
}

TEST_F(ServingDirWatchTest, AnUnreadableManifestIsReportedForThePromotionToRefuse) {
  ServingDirWatch watch;
  (void)watch.poll(serving("v1"));
  std::ofstream(dir_ + "/manifest.json", std::ios::trunc) << "{not json";
  (void)watch.poll(serving("v1"));
  auto changes = watch.poll(serving("v1"));
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].version, "");
}

TEST_F(ServingDirWatchTest, AFullModelDirectoryIsWatchedAndADirectoryNoLongerServingIsForgotten) {
  ServingDirWatch watch;
  ServingState full;
  full.model_path = dir_ + "/adapter.gguf";
  full.model_dir = dir_;
  full.model_version = "v1";
  (void)watch.poll(full);
  write_version("v2", "a full model, version two");
  (void)watch.poll(full);
  auto changes = watch.poll(full);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0].task, "") << "the full model";

  // Served no more, then again: seen for the first time, as loaded.
  (void)watch.poll(ServingState{});
  EXPECT_TRUE(watch.poll(full).empty());
  EXPECT_TRUE(watch.poll(full).empty());
}

TEST_F(ServingDirWatchTest, AMissingDirectoryIsAStampNotAnError) {
  fs::remove_all(dir_);
  EXPECT_TRUE(ServingDirWatch::stamp_directory(dir_).empty());
  ServingDirWatch watch;
  EXPECT_TRUE(watch.poll(serving("v1")).empty());
}

}  // namespace
}  // namespace hengshi::edge
