#include "core/cancel_token.h"

#include <gtest/gtest.h>

namespace hengshi {
namespace {

TEST(CancelTokenTest, FiresRegisteredCallbacksOnceAndLateOnesImmediately) {
  CancelToken token;
  CancelToken copy = token;  // copies share the signal
  int fired = 0;
  auto registration = token.on_cancel([&] { ++fired; });
  {
    auto dropped = token.on_cancel([&] { fired += 100; });  // unregistered before cancel
  }
  copy.cancel();
  copy.cancel();
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(token.cancelled());
  auto late = token.on_cancel([&] { ++fired; });
  EXPECT_EQ(fired, 2);
}

}  // namespace
}  // namespace hengshi
