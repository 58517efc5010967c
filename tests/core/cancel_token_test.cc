#include "core/cancel_token.h"

#include <gtest/gtest.h>

#include <vector>

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

TEST(CancelTokenTest, CallbacksFireInRegistrationOrderPastTheInlineCapacity) {
  CancelToken token;
  std::vector<int> order;
  std::vector<CancelToken::Registration> registrations;
  for (int i = 0; i < 5; ++i) registrations.push_back(token.on_cancel([&order, i] { order.push_back(i); }));
  registrations.erase(registrations.begin() + 2);  // the middle one leaves before the cancel
  token.cancel();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 3, 4}));
}

TEST(CancelTokenTest, AResetHandleIsNeverCancelledAndLeavesItsCopiesAlone) {
  CancelToken token;
  CancelToken held = token;
  int fired = 0;
  auto registration = token.on_cancel([&] { ++fired; });
  held.reset();
  EXPECT_FALSE(held.cancelled());
  held.cancel();  // does nothing: the handle refers to no request now
  EXPECT_EQ(fired, 0);
  EXPECT_FALSE(token.cancelled());
  auto ignored = held.on_cancel([&] { fired += 100; });
  token.cancel();
  EXPECT_EQ(fired, 1);
  EXPECT_FALSE(held.cancelled());
}

}  // namespace
}  // namespace hengshi
