#include "chain/offline_mode.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "obs/metrics.h"

namespace hengshi::chain {
namespace {

using Kind = cloud::UpstreamErrorKind;

class OfflineModeTest : public ::testing::Test {
 protected:
  std::unique_ptr<OfflineMode> make(OfflineConfig config = {}, int edge_threshold = 3) {
    return std::make_unique<OfflineMode>(std::move(config), edge_threshold, registry_);
  }
  double counter(const std::string& name, const std::string& to) {
    return registry_.counter(name, "", {{"to", to}}).value();
  }
  double gauge(const std::string& name) { return registry_.gauge(name, "").value(); }

  obs::Registry registry_;
};

TEST_F(OfflineModeTest, StartsOnlineWithTheEdgeAvailable) {
  auto mode = make();
  EXPECT_FALSE(mode->offline());
  EXPECT_TRUE(mode->edge_available());
  EXPECT_EQ(mode->consecutive_cloud_failures(), 0);
  EXPECT_EQ(gauge("hengshi_offline"), 0);
  EXPECT_EQ(gauge("hengshi_edge_available"), 1);
}

TEST_F(OfflineModeTest, ThreeUnreachableCallsInARowSwitchOffline) {
  auto mode = make();
  mode->record_cloud_outcome(Kind::connect_failed);
  mode->record_cloud_outcome(Kind::connect_timeout);
  EXPECT_FALSE(mode->offline());
  EXPECT_EQ(mode->consecutive_cloud_failures(), 2);
  mode->record_cloud_outcome(Kind::ttft_timeout);
  EXPECT_TRUE(mode->offline());
  EXPECT_EQ(counter("hengshi_offline_transitions_total", "offline"), 1);
  EXPECT_EQ(gauge("hengshi_offline"), 1);
  // More failures while offline are not new transitions.
  mode->record_cloud_outcome(Kind::total_timeout);
  EXPECT_TRUE(mode->offline());
  EXPECT_EQ(counter("hengshi_offline_transitions_total", "offline"), 1);
}

TEST_F(OfflineModeTest, TheThresholdIsConfigurable) {
  OfflineConfig config;
  config.consecutive_failures = 5;
  auto mode = make(config);
  for (int i = 0; i < 4; ++i) mode->record_cloud_outcome(Kind::total_timeout);
  EXPECT_FALSE(mode->offline());
  mode->record_cloud_outcome(Kind::total_timeout);
  EXPECT_TRUE(mode->offline());
}

TEST_F(OfflineModeTest, ASuccessResetsTheCount) {
  auto mode = make();
  mode->record_cloud_outcome(Kind::connect_failed);
  mode->record_cloud_outcome(Kind::connect_failed);
  mode->record_cloud_outcome(std::nullopt);
  EXPECT_EQ(mode->consecutive_cloud_failures(), 0);
  mode->record_cloud_outcome(Kind::connect_failed);
  mode->record_cloud_outcome(Kind::connect_failed);
  EXPECT_FALSE(mode->offline());
  mode->record_cloud_outcome(Kind::connect_failed);
  EXPECT_TRUE(mode->offline());
}

TEST_F(OfflineModeTest, AnHttpErrorProvesReachabilityAndResetsTheCount) {
  for (Kind reached : {Kind::rate_limited, Kind::server_error, Kind::client_error,
                       Kind::auth_failed, Kind::bad_response}) {
    auto mode = make();
    mode->record_cloud_outcome(Kind::connect_failed);
    mode->record_cloud_outcome(Kind::connect_failed);
    mode->record_cloud_outcome(reached);
    EXPECT_EQ(mode->consecutive_cloud_failures(), 0) << cloud::to_string(reached);
    mode->record_cloud_outcome(Kind::connect_failed);
    EXPECT_FALSE(mode->offline()) << cloud::to_string(reached);
  }
}

TEST_F(OfflineModeTest, KindsThatSayNothingNeitherCountNorReset) {
  for (Kind neutral : {Kind::cancelled, Kind::overloaded, Kind::closed_early}) {
    auto mode = make();
    mode->record_cloud_outcome(neutral);
    mode->record_cloud_outcome(neutral);
    mode->record_cloud_outcome(neutral);
    EXPECT_FALSE(mode->offline()) << cloud::to_string(neutral);
    EXPECT_EQ(mode->consecutive_cloud_failures(), 0);
    mode->record_cloud_outcome(Kind::connect_failed);
    mode->record_cloud_outcome(Kind::connect_failed);
    mode->record_cloud_outcome(neutral);  // between two failures: the run goes on
    EXPECT_EQ(mode->consecutive_cloud_failures(), 2);
    mode->record_cloud_outcome(Kind::connect_failed);
    EXPECT_TRUE(mode->offline()) << cloud::to_string(neutral);
  }
}

TEST_F(OfflineModeTest, ClassificationOfEveryKnownKind) {
  EXPECT_EQ(classify_cloud_failure(Kind::connect_failed), CloudReach::unreachable);
  EXPECT_EQ(classify_cloud_failure(Kind::connect_timeout), CloudReach::unreachable);
  EXPECT_EQ(classify_cloud_failure(Kind::ttft_timeout), CloudReach::unreachable);
  EXPECT_EQ(classify_cloud_failure(Kind::total_timeout), CloudReach::unreachable);
  EXPECT_EQ(classify_cloud_failure(Kind::server_error), CloudReach::reached);
  EXPECT_EQ(classify_cloud_failure(Kind::rate_limited), CloudReach::reached);
  EXPECT_EQ(classify_cloud_failure(Kind::cancelled), CloudReach::unknown);
  EXPECT_EQ(classify_cloud_failure(Kind::overloaded), CloudReach::unknown);
  // A kind past the last one this file knows (e.g. a breaker's refusal) says nothing.
  auto later = static_cast<Kind>(static_cast<int>(Kind::cancelled) + 1);
  EXPECT_EQ(classify_cloud_failure(later), CloudReach::unknown);
}

TEST_F(OfflineModeTest, OnlyASuccessOrAProbeSwitchesBackOnline) {
  auto mode = make();
  for (int i = 0; i < 3; ++i) mode->record_cloud_outcome(Kind::connect_failed);
  ASSERT_TRUE(mode->offline());
  mode->record_cloud_outcome(Kind::server_error);  // reachable, but not answering
  EXPECT_TRUE(mode->offline());
  mode->record_probe(false, "small-1");
  EXPECT_TRUE(mode->offline());
  mode->record_probe(true, "small-1");
  EXPECT_FALSE(mode->offline());
  EXPECT_EQ(counter("hengshi_offline_transitions_total", "online"), 1);
  EXPECT_EQ(gauge("hengshi_offline"), 0);

  for (int i = 0; i < 3; ++i) mode->record_cloud_outcome(Kind::connect_timeout);
  ASSERT_TRUE(mode->offline());
  mode->record_cloud_outcome(std::nullopt);  // a late call that did get through
  EXPECT_FALSE(mode->offline());
  EXPECT_EQ(counter("hengshi_offline_transitions_total", "offline"), 2);
  EXPECT_EQ(counter("hengshi_offline_transitions_total", "online"), 2);
}

TEST_F(OfflineModeTest, DisabledNeverGoesOffline) {
  OfflineConfig config;
  config.enabled = false;
  auto mode = make(config);
  for (int i = 0; i < 20; ++i) mode->record_cloud_outcome(Kind::connect_failed);
  EXPECT_FALSE(mode->offline());
  EXPECT_EQ(mode->consecutive_cloud_failures(), 20);  // still visible in /readyz
  EXPECT_EQ(counter("hengshi_offline_transitions_total", "offline"), 0);
  EXPECT_FALSE(mode->to_json()["offline"].get<bool>());
}

TEST_F(OfflineModeTest, RepeatedEdgeErrorsMakeTheEdgeUnavailableAndASuccessRestoresIt) {
  auto mode = make({}, 3);
  mode->record_edge_error("llama_decode failed");
  mode->record_edge_error("llama_decode failed");
  mode->record_edge_success();  // resets the run
  mode->record_edge_error("llama_decode failed");
  mode->record_edge_error("llama_decode failed");
  EXPECT_TRUE(mode->edge_available());
  mode->record_edge_error("out of memory");
  EXPECT_FALSE(mode->edge_available());
  EXPECT_EQ(counter("hengshi_edge_transitions_total", "unavailable"), 1);
  EXPECT_EQ(gauge("hengshi_edge_available"), 0);
  EXPECT_NE(mode->to_json()["edge_reason"].get<std::string>().find("out of memory"),
            std::string::npos);
  mode->record_edge_error("again");
  EXPECT_EQ(counter("hengshi_edge_transitions_total", "unavailable"), 1);

  mode->record_edge_success();
  EXPECT_TRUE(mode->edge_available());
  EXPECT_EQ(counter("hengshi_edge_transitions_total", "available"), 1);
  EXPECT_EQ(gauge("hengshi_edge_available"), 1);
}

TEST_F(OfflineModeTest, AnEdgeOutForErrorsIsTriedAgainButAFailedLoadIsNot) {
  // Retry after 0 ms: out, yet worth trying at once; a success brings it back.
  OfflineMode soon({}, 2, registry_, /*edge_retry_ms=*/0);
  EXPECT_TRUE(soon.edge_worth_trying());
  soon.record_edge_error("decode_failed");
  soon.record_edge_error("decode_failed");
  EXPECT_FALSE(soon.edge_available());
  EXPECT_TRUE(soon.edge_worth_trying());
  soon.record_edge_success();
  EXPECT_TRUE(soon.edge_available());
  // Retry after a minute: out and not tried again yet.
  OfflineMode later({}, 2, registry_, /*edge_retry_ms=*/60'000);
  later.record_edge_error("decode_failed");
  later.record_edge_error("decode_failed");
  EXPECT_FALSE(later.edge_worth_trying());
  // A model that failed to load never comes back by itself.
  OfflineMode load_failed({}, 2, registry_, /*edge_retry_ms=*/0);
  load_failed.set_edge_available(false, "edge.intent_model: missing");
  EXPECT_FALSE(load_failed.edge_worth_trying());
}

TEST_F(OfflineModeTest, EdgeAvailabilityCanBeSetExplicitly) {
  auto mode = make();
  mode->set_edge_available(false, "model file missing: /models/edge.gguf");
  EXPECT_FALSE(mode->edge_available());
  auto detail = mode->to_json();
  EXPECT_FALSE(detail["edge_available"].get<bool>());
  EXPECT_EQ(detail["edge_reason"], "model file missing: /models/edge.gguf");
  mode->set_edge_available(false, "still missing");  // no new transition
  EXPECT_EQ(counter("hengshi_edge_transitions_total", "unavailable"), 1);
  mode->set_edge_available(true, "model loaded");
  EXPECT_TRUE(mode->edge_available());
  EXPECT_EQ(mode->to_json()["edge_reason"], "model loaded");
  EXPECT_EQ(counter("hengshi_edge_transitions_total", "available"), 1);
  // The edge and the cloud are independent.
  EXPECT_FALSE(mode->offline());
}

TEST_F(OfflineModeTest, ToJsonSnapshot) {
  auto mode = make();
  auto before = mode->to_json();
  EXPECT_FALSE(before["offline"].get<bool>());
  EXPECT_TRUE(before["edge_available"].get<bool>());
  EXPECT_EQ(before["consecutive_cloud_failures"], 0);
  EXPECT_EQ(before["edge_reason"], "");
  EXPECT_GT(before["since_ms"].get<std::int64_t>(), 0);
  for (int i = 0; i < 3; ++i) mode->record_cloud_outcome(Kind::connect_failed);
  auto after = mode->to_json();
  EXPECT_TRUE(after["offline"].get<bool>());
  EXPECT_EQ(after["consecutive_cloud_failures"], 3);
  EXPECT_GE(after["since_ms"].get<std::int64_t>(), before["since_ms"].get<std::int64_t>());
}

TEST_F(OfflineModeTest, ConcurrentRecordersSwitchExactlyOnce) {
  OfflineConfig config;
  config.consecutive_failures = 50;
  auto mode = make(config);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        mode->record_cloud_outcome(Kind::connect_failed);
        (void)mode->offline();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_TRUE(mode->offline());
  EXPECT_EQ(mode->consecutive_cloud_failures(), 4000);
  EXPECT_EQ(counter("hengshi_offline_transitions_total", "offline"), 1);
}

}  // namespace
}  // namespace hengshi::chain
