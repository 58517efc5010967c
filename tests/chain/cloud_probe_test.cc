// The offline-mode probe: UpstreamClient::probe() against a real hengshi-sim, a closed port and
// a scripted fake upstream, and probe_while_offline() switching the gateway back online.
#include "chain/cloud_probe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cloud/fake_upstream.h"
#include "cloud/test_tls.h"
#include "cloud/tls_context.h"
#include "obs/metrics.h"
#include "support/child_process.h"
#include "support/wait_until.h"

namespace hengshi::chain {
namespace {

using cloud::testing::FakeReply;
using cloud::testing::FakeUpstream;
using hengshi::testing::binary_path;
using hengshi::testing::ChildProcess;
using hengshi::testing::wait_until;
using namespace std::chrono_literals;

constexpr const char* kProbeKeyEnv = "HENGSHI_CHAIN_PROBE_TEST_KEY";

ChildProcess start_sim(const std::string& listen = "127.0.0.1:0") {
  return ChildProcess::start(
      {binary_path("tools/sim/hengshi-sim"), "--listen", listen, "--name", "probe-sim"});
}

// A loopback port nothing listens on: bound but never listening, so connections are refused,
// and held for the whole test run, so no other test's server (ctest -j2) can take it meanwhile.
int closed_port() {
  static asio::io_context io;
  static std::vector<std::unique_ptr<tcp::socket>> held;
  auto& socket = *held.emplace_back(std::make_unique<tcp::socket>(io));
  socket.open(tcp::v4());
  socket.bind(tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return socket.local_endpoint().port();
}

std::string base_url(int port) { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }

Millis since(Clock::time_point start) {
  return std::chrono::duration_cast<Millis>(Clock::now() - start);
}

class CloudProbeTest : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv(kProbeKeyEnv, "sk-probe-test", 1); }
  void TearDown() override { ::unsetenv(kProbeKeyEnv); }

  static UpstreamConfig member(const std::string& url, const std::string& name = "small-1") {
    UpstreamConfig config;
    config.name = name;
    config.base_url = url;
    config.model = "sim-small";
    config.api_key_env = kProbeKeyEnv;
    config.connect_timeout_ms = 1000;
    config.ttft_timeout_ms = 5000;
    config.total_timeout_ms = 10000;
    return config;
  }
  static std::unique_ptr<cloud::UpstreamClient> client(
      const UpstreamConfig& config, std::shared_ptr<asio::ssl::context> tls = nullptr) {
    auto url = parse_url(config.base_url);
    EXPECT_TRUE(url.ok());
    return std::make_unique<cloud::UpstreamClient>(config, url.value(), std::move(tls), "probe");
  }

  // Runs one probe on this thread's io_context; returns its answer.
  bool probe(cloud::UpstreamClient& c, Deadline deadline) {
    std::optional<bool> out;
    asio::co_spawn(
        io_, [&]() -> awaitable<void> { out = co_await c.probe(deadline); },
        [](std::exception_ptr failure) {
          if (failure) std::rethrow_exception(failure);
        });
    io_.restart();
    io_.run();
    EXPECT_TRUE(out.has_value());
    return out.value_or(false);
  }

  // probe_while_offline on its own thread, as serve_command runs it.
  struct Loop {
    Loop(OfflineMode& mode, std::vector<cloud::UpstreamClient*> members, std::int64_t interval_ms)
        : timer(io), stopping(std::make_shared<std::atomic<bool>>(false)) {
      asio::co_spawn(io,
                     probe_while_offline(mode, std::move(members), timer, interval_ms, stopping),
                     [this](std::exception_ptr failure) { escaped = failure != nullptr; });
      thread = std::thread([this] { io.run(); });
    }
    // Sets the flag and cancels the timer, as a shutdown would; returns once the loop ended.
    void stop() {
      stopping->store(true);
      asio::post(io, [this] { timer.cancel(); });
      if (thread.joinable()) thread.join();
    }
    ~Loop() { stop(); }

    asio::io_context io;
    asio::steady_timer timer;
    std::shared_ptr<std::atomic<bool>> stopping;
    std::thread thread;
    bool escaped = false;
  };

  static void go_offline(OfflineMode& mode) {
    for (int i = 0; i < mode.config().consecutive_failures; ++i) {
      mode.record_cloud_outcome(cloud::UpstreamErrorKind::connect_failed);
    }
    ASSERT_TRUE(mode.offline());
  }

  asio::io_context io_;  // declared first: clients made in a test die before it
  obs::Registry registry_;
};

TEST_F(CloudProbeTest, ProbeToTheSimIsTrue) {
  auto sim = start_sim();
  auto c = client(member(sim.base_url() + "/v1"));
  EXPECT_TRUE(probe(*c, Deadline::after(5s)));
  EXPECT_EQ(c->idle_connections(), 0u);  // a probe's connection is never pooled
}

TEST_F(CloudProbeTest, ProbeToAClosedPortIsFalseWithinTheDeadline) {
  auto c = client(member(base_url(closed_port())));
  auto start = Clock::now();
  EXPECT_FALSE(probe(*c, Deadline::after(2s)));
  EXPECT_LT(since(start), 2s);
}

TEST_F(CloudProbeTest, ProbeToASilentServerEndsAtTheDeadline) {
  FakeUpstream fake(FakeUpstream::Mode::silent);
  auto c = client(member(fake.base_url()));
  auto start = Clock::now();
  EXPECT_FALSE(probe(*c, Deadline::after(300ms)));
  auto took = since(start);
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 2s);  // the deadline, not ttft_timeout_ms (5 s), bounded it
  EXPECT_EQ(fake.accepted(), 1);
}

TEST_F(CloudProbeTest, ProbeSendsGetModelsWithTheMembersKeyOnAFreshConnection) {
  FakeUpstream fake;
  fake.set_handler([](const cloud::testing::FakeRequest& request) {
    FakeReply reply;  // a chat completion, unless the models list was asked for
    if (request.target == "/v1/models") reply.body = R"({"object":"list","data":[]})";
    return reply;
  });
  auto c = client(member(fake.base_url()));
  // A pooled keep-alive connection from a normal call must not be reused by the probe.
  std::optional<bool> called;
  asio::co_spawn(
      io_,
      [&]() -> awaitable<void> {
        nlohmann::json request = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
        auto reply = co_await c->complete(request, Deadline::after(5s), CancelToken{});
        called = reply.ok();
      },
      asio::detached);
  io_.run();
  ASSERT_EQ(called, std::optional<bool>(true));
  ASSERT_EQ(c->idle_connections(), 1u);

  EXPECT_TRUE(probe(*c, Deadline::after(5s)));
  EXPECT_EQ(fake.accepted(), 2);
  EXPECT_EQ(c->idle_connections(), 1u);
  auto requests = fake.requests();
  ASSERT_EQ(requests.size(), 2u);
  auto sent = requests[1];
  EXPECT_EQ(sent.method, "GET");
  EXPECT_EQ(sent.target, "/v1/models");
  EXPECT_EQ(sent.headers["authorization"], "Bearer sk-probe-test");
  EXPECT_EQ(sent.headers["connection"], "close");
  EXPECT_TRUE(sent.body.empty());
}

TEST_F(CloudProbeTest, AnyStatusBelow500IsAnAnswer) {
  FakeUpstream fake;
  auto c = client(member(fake.base_url()));
  for (int status : {200, 401, 403, 404, 429}) {
    FakeReply reply;
    reply.status = status;
    reply.body = R"({"error":{"message":"x"}})";
    fake.reply_always(reply);
    EXPECT_TRUE(probe(*c, Deadline::after(5s))) << status;
  }
  for (int status : {500, 502, 503}) {
    FakeReply reply;
    reply.status = status;
    reply.body = R"({"error":{"message":"down"}})";
    fake.reply_always(reply);
    EXPECT_FALSE(probe(*c, Deadline::after(5s))) << status;
  }
}

TEST_F(CloudProbeTest, ProbeWorksOverTls) {
  auto certificate = cloud::testing::make_self_signed("IP:127.0.0.1");
  cloud::testing::TempPemFile ca(certificate.cert_pem);
  FakeUpstream fake(FakeUpstream::Mode::https, cloud::testing::server_tls_context(certificate));
  FakeReply ok;
  ok.body = R"({"object":"list","data":[]})";
  fake.reply_always(ok);
  auto config = member(fake.base_url());
  config.ca_file = ca.path();
  auto tls = cloud::make_member_tls_context(config, nullptr);
  ASSERT_TRUE(tls.ok()) << tls.error().message;
  auto c = client(config, tls.value());
  EXPECT_TRUE(probe(*c, Deadline::after(5s)));
  ASSERT_EQ(fake.requests().size(), 1u);
  EXPECT_EQ(fake.requests()[0].target, "/v1/models");

  auto untrusting = client(member(fake.base_url(), "no-ca"));  // system CAs only
  EXPECT_FALSE(probe(*untrusting, Deadline::after(5s)));
}

TEST_F(CloudProbeTest, ProbeMembersStopsAtTheFirstThatAnswers) {
  auto sim = start_sim();
  auto down = client(member(base_url(closed_port()), "down"));
  auto up = client(member(sim.base_url() + "/v1", "up"));
  auto never = client(member(base_url(closed_port()), "never-asked"));
  std::vector<cloud::UpstreamClient*> members{down.get(), up.get(), never.get()};
  cloud::UpstreamClient* answered = nullptr;
  asio::co_spawn(
      io_,
      [&]() -> awaitable<void> { answered = co_await probe_members(members, Deadline::after(5s)); },
      asio::detached);
  io_.run();
  EXPECT_EQ(answered, up.get());

  std::vector<cloud::UpstreamClient*> all_down{down.get(), never.get()};
  answered = up.get();
  asio::co_spawn(
      io_,
      [&]() -> awaitable<void> {
        answered = co_await probe_members(all_down, Deadline::after(5s));
      },
      asio::detached);
  io_.restart();
  io_.run();
  EXPECT_EQ(answered, nullptr);
}

TEST_F(CloudProbeTest, ProbeWhileOfflineSwitchesOnlineWhenTheSimIsUp) {
  auto sim = start_sim();
  OfflineMode mode(OfflineConfig{}, kEdgeErrorThreshold, registry_);
  go_offline(mode);
  auto c = client(member(sim.base_url() + "/v1"));
  Loop loop(mode, {c.get()}, 20);
  EXPECT_TRUE(wait_until([&] { return !mode.offline(); }, 10s));
  EXPECT_EQ(registry_.counter("hengshi_offline_transitions_total", "", {{"to", "online"}}).value(),
            1);
  loop.stop();
  EXPECT_FALSE(loop.escaped);
}

TEST_F(CloudProbeTest, ProbeWhileOfflineRecoversWhenTheSimComesBack) {
  // The cloud goes away (the sim is stopped), the gateway is offline, then the sim comes back on
  // the same port and the probe notices.
  auto first = std::make_unique<ChildProcess>(start_sim());
  const int port = first->port();
  first.reset();  // SIGTERM and reap: the port is closed now
  OfflineMode mode(OfflineConfig{}, kEdgeErrorThreshold, registry_);
  go_offline(mode);
  auto c = client(member(base_url(port)));
  Loop loop(mode, {c.get()}, 20);
  EXPECT_TRUE(mode.offline());
  auto sim = start_sim("127.0.0.1:" + std::to_string(port));
  EXPECT_TRUE(wait_until([&] { return !mode.offline(); }, 10s));
  loop.stop();
}

TEST_F(CloudProbeTest, ProbeWhileOfflineStaysOfflineWhileProbesFail) {
  FakeUpstream fake;
  FakeReply down;
  down.status = 503;
  down.body = R"({"error":{"message":"down"}})";
  fake.reply_always(down);
  OfflineMode mode(OfflineConfig{}, kEdgeErrorThreshold, registry_);
  go_offline(mode);
  auto c = client(member(fake.base_url()));
  Loop loop(mode, {c.get()}, 10);
  // Several rounds of failed probes (each on a fresh connection): still offline.
  ASSERT_TRUE(wait_until([&] { return fake.accepted() >= 3; }, 10s));
  EXPECT_TRUE(mode.offline());
  FakeReply up;
  up.body = R"({"object":"list","data":[]})";
  fake.reply_always(up);
  EXPECT_TRUE(wait_until([&] { return !mode.offline(); }, 10s));
}

TEST_F(CloudProbeTest, ProbeWhileOfflineEndsPromptlyWhenStopped) {
  OfflineMode mode(OfflineConfig{}, kEdgeErrorThreshold, registry_);
  go_offline(mode);
  auto c = client(member(base_url(closed_port())));
  Loop loop(mode, {c.get()}, 60'000);  // would wait a minute for its first round
  auto start = Clock::now();
  loop.stop();
  EXPECT_LT(since(start), 1s);
  EXPECT_FALSE(loop.escaped);
  EXPECT_TRUE(mode.offline());
}

TEST_F(CloudProbeTest, ProbeWhileOfflineWithNoMembersReturnsAtOnce) {
  OfflineMode mode(OfflineConfig{}, kEdgeErrorThreshold, registry_);
  Loop loop(mode, {}, 60'000);
  auto start = Clock::now();
  loop.thread.join();  // ends by itself: nothing to probe
  EXPECT_LT(since(start), 1s);
}

}  // namespace
}  // namespace hengshi::chain
