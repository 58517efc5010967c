// A gateway fixture whose suite first trains the shipped demo intent model (data/demo_faq.jsonl)
// with the real CLI (no search: seconds, not minutes), shared by every test of the suite.
#pragma once

#include <filesystem>
#include <string>

#include "integration/gateway_fixture.h"

namespace hengshi::testing {

class DemoIntentFixture : public GatewayFixture {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = new std::string(temp_path("demo-intent"));
    auto trained = ChildProcess::run({binary_path("src/cli/hengshi"), "train", "--data",
                                      source_path("data/demo_faq.jsonl"), "--out", *model_dir_,
                                      "--search-budget", "0"});
    train_output_ = new std::string(trained.output);
    train_ok_ = trained.exit_code == 0;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*model_dir_);
    delete model_dir_;
    delete train_output_;
  }
  void SetUp() override { ASSERT_TRUE(train_ok_) << *train_output_; }

  inline static std::string* model_dir_ = nullptr;
  inline static std::string* train_output_ = nullptr;
  inline static bool train_ok_ = false;
};

}  // namespace hengshi::testing
