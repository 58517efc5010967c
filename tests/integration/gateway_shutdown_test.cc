// SIGTERM drains: the request in flight finishes with its answer, new connections are refused,
// and the process exits 0.
#include <signal.h>

#include <future>

#include "integration/gateway_fixture.h"

namespace hengshi::testing {
namespace {

class GatewayShutdownTest : public GatewayFixture {
 protected:
  void SetUp() override { start(); }
};

TEST_F(GatewayShutdownTest, SigtermLetsInFlightRequestsFinishAndRefusesNewOnes) {
  auto in_flight = std::async(std::launch::async, [&] {
    return chat(user_message("cloud-small", "take your time [[sim:slow=800]]"));
  });
  ASSERT_TRUE(wait_until([&] { return sim_stats(*small_)["in_flight"] == 1; }));

  gateway_->signal(SIGTERM);
  // Readiness and new connections go away while the old request is still running.
  EXPECT_TRUE(wait_until([&] {
    try {
      HttpConnection probe(gateway_->host(), gateway_->port(), std::chrono::milliseconds(500));
      return false;
    } catch (const std::exception&) {
      return true;  // connection refused: the listener is closed
    }
  }));

  auto result = in_flight.get();
  EXPECT_EQ(result.status, 200) << result.body;
  EXPECT_EQ(result.json()["hengshi"]["route"], "cloud-small");
  auto exit_code = gateway_->wait(std::chrono::seconds(10));
  ASSERT_TRUE(exit_code.has_value()) << "gateway did not exit after draining";
  EXPECT_EQ(*exit_code, 0) << gateway_->output();
}

TEST_F(GatewayShutdownTest, IdleKeepAliveConnectionsDoNotHoldUpShutdown) {
  HttpConnection idle(gateway_->host(), gateway_->port());
  ASSERT_EQ(idle.send({"GET", "/healthz", "", "", {}}).status, 200);
  gateway_->signal(SIGTERM);
  auto exit_code = gateway_->wait(std::chrono::seconds(5));
  ASSERT_TRUE(exit_code.has_value()) << "an idle keep-alive connection blocked the drain";
  EXPECT_EQ(*exit_code, 0);
}

}  // namespace
}  // namespace hengshi::testing
