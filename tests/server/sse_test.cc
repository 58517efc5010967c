#include "server/sse.h"

#include <gtest/gtest.h>

namespace hengshi::server {
namespace {

TEST(SseTest, FramesOneLinePayload) {
  EXPECT_EQ(sse_event(R"({"a":1})"), "data: {\"a\":1}\n\n");
}

TEST(SseTest, SplitsMultiLinePayloadIntoDataLines) {
  EXPECT_EQ(sse_event("a\nb\r\nc"), "data: a\ndata: b\ndata: c\n\n");
}

TEST(SseTest, DoneTerminator) { EXPECT_EQ(kSseDone, "data: [DONE]\n\n"); }

}  // namespace
}  // namespace hengshi::server
