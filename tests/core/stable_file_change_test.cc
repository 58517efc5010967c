#include "core/stable_file_change.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace hengshi {
namespace {

namespace fs = std::filesystem;

class StableFileChangeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("hengshi-stable-" + std::to_string(::getpid()) + "-" +
                                        std::to_string(std::random_device{}()));
    fs::create_directories(dir_);
    path_ = (dir_ / "keys.yaml").string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // A write that moves the size, so the stamp changes whatever the clock's resolution.
  void append(const std::string& text) { std::ofstream(path_, std::ios::app) << text; }

  fs::path dir_;
  std::string path_;
};

TEST_F(StableFileChangeTest, MissingAndEmptyPathsDoNotExist) {
  const FileStamp stamp = stamp_files({"", path_});
  ASSERT_EQ(stamp.size(), 2u);
  EXPECT_FALSE(stamp[0].exists);
  EXPECT_FALSE(stamp[1].exists);
  append("abc");
  const FileStamp now = stamp_files({path_, dir_.string()});
  EXPECT_TRUE(now[0].exists);
  EXPECT_EQ(now[0].size, 3u);
  EXPECT_TRUE(now[1].exists);  // a directory: present, size 0
  EXPECT_EQ(now[1].size, 0u);
}

TEST_F(StableFileChangeTest, AChangeIsReadyOnlyOnceTwoPollsAgree) {
  append("a: 1\n");
  StableFileChange watch(stamp_files({path_}));
  EXPECT_FALSE(watch.ready(stamp_files({path_})));  // nothing changed

  append("b: 2\n");                                  // the writer's first half
  EXPECT_FALSE(watch.ready(stamp_files({path_})));  // changed, but maybe still being written
  append("c: 3\n");                                  // the second half
  EXPECT_FALSE(watch.ready(stamp_files({path_})));  // moved again since the last poll
  EXPECT_TRUE(watch.ready(stamp_files({path_})));   // the same twice: load it

  watch.loaded(stamp_files({path_}));
  EXPECT_FALSE(watch.ready(stamp_files({path_})));  // loaded: nothing to do

  // Removed: a change like any other (the reload reports the missing file once).
  fs::remove(path_);
  EXPECT_FALSE(watch.ready(stamp_files({path_})));
  EXPECT_TRUE(watch.ready(stamp_files({path_})));
  watch.loaded(stamp_files({path_}));
  EXPECT_FALSE(watch.ready(stamp_files({path_})));
}

TEST_F(StableFileChangeTest, ChangingBackBeforeItSettlesIsNoChange) {
  append("a: 1\n");
  const FileStamp original = stamp_files({path_});
  StableFileChange watch(original);
  FileStamp moved = original;
  moved[0].size += 10;
  EXPECT_FALSE(watch.ready(moved));
  EXPECT_FALSE(watch.ready(original));  // back as loaded: the pending change is dropped
  EXPECT_FALSE(watch.ready(moved));     // so this is a first sighting again
  EXPECT_TRUE(watch.ready(moved));
}

}  // namespace
}  // namespace hengshi
