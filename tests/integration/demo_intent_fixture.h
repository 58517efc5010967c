// A gateway fixture on the shipped demo intent model (data/demo_faq.jsonl), trained by the real
// CLI without a search, once per build and shared by every test process (support/shared_model.h).
#pragma once

#include <string>

#include "integration/gateway_fixture.h"
#include "support/shared_model.h"

namespace hengshi::testing {

class DemoIntentFixture : public GatewayFixture {
 protected:
  static void SetUpTestSuite() {
    SharedModel model = shared_demo_intent_model();
    model_dir_ = new std::string(model.dir);
    train_output_ = new std::string(model.output);
    train_ok_ = model.ok;
  }
  static void TearDownTestSuite() {
    delete model_dir_;
    delete train_output_;
  }
  void SetUp() override { ASSERT_TRUE(train_ok_) << *train_output_; }

  inline static std::string* model_dir_ = nullptr;
  inline static std::string* train_output_ = nullptr;
  inline static bool train_ok_ = false;
};

}  // namespace hengshi::testing
