#include "core/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace hengshi {
namespace {

std::string read_all(std::FILE* file) {
  std::rewind(file);
  std::string text;
  char buffer[256];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, file)) text.append(buffer, n);
  return text;
}

TEST(ProgressTest, QuietWhenTheOutputIsNotATerminal) {
  ::unsetenv("HENGSHI_PROGRESS");
  std::FILE* file = std::tmpfile();
  {
    Progress progress("work", 3, file);
    EXPECT_FALSE(progress.enabled()) << "a file is not a terminal";
    for (int i = 0; i < 3; ++i) progress.advance();
  }
  EXPECT_EQ(read_all(file), "");
  std::fclose(file);
}

TEST(ProgressTest, ForcedOnItDrawsTheCountAndEndsTheLine) {
  ::setenv("HENGSHI_PROGRESS", "1", 1);
  std::FILE* file = std::tmpfile();
  {
    Progress progress("calibrate: predicting", 4, file);
    ASSERT_TRUE(progress.enabled());
    for (int i = 0; i < 4; ++i) progress.advance();
  }
  const std::string text = read_all(file);
  EXPECT_EQ(text.front(), '\r');
  EXPECT_NE(text.find("calibrate: predicting 4/4 (100%)\n"), std::string::npos) << text;
  ::setenv("HENGSHI_PROGRESS", "0", 1);
  EXPECT_FALSE(Progress::wanted(stderr));
  ::unsetenv("HENGSHI_PROGRESS");
  std::fclose(file);
}

}  // namespace
}  // namespace hengshi
