// CloudPool with breakers, avoid lists, the failure penalty and the bulkhead, over real
// UpstreamClients talking to in-process fake upstreams on 127.0.0.1.
#include "cloud/cloud_pool.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "cloud/fake_upstream.h"
#include "obs/metrics.h"
#include "support/run_until_done.h"

namespace hengshi::cloud {
namespace {

using nlohmann::json;
using testing::FakeReply;
using testing::FakeRequest;
using testing::FakeUpstream;
using namespace std::chrono_literals;

const json kRequest = {{"model", "cloud-small"},
                       {"messages", {{{"role", "user"}, {"content", "hello"}}}}};

FakeReply server_error() {
  FakeReply reply;
  reply.status = 500;
  reply.body = R"({"error":{"message":"boom"}})";
  return reply;
}

class CloudPoolTest : public ::testing::Test {
 protected:
  template <class MakeAwaitable>
  auto run(MakeAwaitable make) {
    return hengshi::testing::run_until_done(ioc_, strand_, std::move(make));
  }

  static UpstreamConfig member(const FakeUpstream& fake, const std::string& name) {
    UpstreamConfig config;
    config.name = name;
    config.base_url = fake.base_url();
    config.model = "upstream-model";
    config.connect_timeout_ms = 2000;
    config.ttft_timeout_ms = 5000;
    config.total_timeout_ms = 10000;
    config.max_concurrent = 8;
    return config;
  }

  std::unique_ptr<CloudPool> pool(std::vector<UpstreamConfig> members,
                                  const ChainConfig& chain = {}, const std::string& name = "") {
    PoolConfig config;
    // A distinct pool name per test keeps the global metrics series apart.
    config.name =
        name.empty() ? ::testing::UnitTest::GetInstance()->current_test_info()->name() : name;
    config.members = std::move(members);
    auto created = CloudPool::create(config, nullptr, nullptr, chain);
    EXPECT_TRUE(created.ok()) << (created.ok() ? "" : created.error().message);
    return created.ok() ? std::move(created).value() : nullptr;
  }

  Result<UpstreamReply, UpstreamError> complete(CloudPool& p, CallOptions options = {}) {
    return run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
      co_return co_await p.complete(kRequest, Deadline::after(10s), CancelToken{}, options);
    });
  }

  Result<StreamSummary, UpstreamError> stream(CloudPool& p, CallOptions options = {}) {
    return run([&]() -> awaitable<Result<StreamSummary, UpstreamError>> {
      json request = kRequest;
      request["stream"] = true;
      ChunkSink sink = [](std::string_view, bool) -> awaitable<bool> { co_return true; };
      co_return co_await p.stream(request, Deadline::after(10s), CancelToken{}, sink, options);
    });
  }

  asio::io_context ioc_;  // declared first: pools made in a test die before it
  asio::strand<asio::io_context::executor_type> strand_ = asio::make_strand(ioc_);
};

TEST_F(CloudPoolTest, AvoidedMemberIsNotChosenWhileAnotherIsEligible) {
  FakeUpstream a;
  FakeUpstream b;
  auto p = pool({member(a, "a"), member(b, "b")});
  ASSERT_TRUE(p);
  for (int i = 0; i < 12; ++i) {
    auto reply = complete(*p, {{"a"}});
    ASSERT_TRUE(reply.ok()) << reply.error().message;
    EXPECT_EQ(reply->upstream, "b");
  }
  EXPECT_EQ(a.requests().size(), 0u);
  EXPECT_EQ(b.requests().size(), 12u);
  // Every member avoided: one of them still answers rather than failing the call.
  auto reply = complete(*p, {{"a", "b"}});
  EXPECT_TRUE(reply.ok());
}

TEST_F(CloudPoolTest, MemberThatFailsFiveCallsInARowOpensAndTrafficMovesToTheOther) {
  FakeUpstream a;
  FakeUpstream b;
  a.reply_always(server_error());
  auto p = pool({member(a, "a"), member(b, "b")});
  ASSERT_TRUE(p);
  // Steer the first 5 calls to `a` by avoiding `b`: all fail, and the 5th opens a's breaker.
  for (int i = 0; i < 5; ++i) {
    auto reply = complete(*p, {{"b"}});
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.error().kind, UpstreamErrorKind::server_error);
    EXPECT_EQ(reply.error().upstream, "a");
    EXPECT_FALSE(reply.error().member_open);
    EXPECT_EQ(p->breaker(0).state(Clock::now()), i < 4 ? BreakerState::closed : BreakerState::open)
        << i;
  }
  EXPECT_EQ(p->breaker(1).state(Clock::now()), BreakerState::closed);
  // Half the members still allow calls: no panic, so even a caller that avoids `b` gets `b`.
  EXPECT_FALSE(p->in_panic());
  for (int i = 0; i < 20; ++i) {
    auto reply = complete(*p, i % 2 == 0 ? CallOptions{{"b"}} : CallOptions{});
    ASSERT_TRUE(reply.ok()) << reply.error().message;
    EXPECT_EQ(reply->upstream, "b");
  }
  EXPECT_EQ(a.requests().size(), 5u);
  EXPECT_EQ(b.requests().size(), 20u);
}

double metric(const std::string& name, const std::string& pool) {
  return name == "hengshi_breaker_panic_total"
             ? obs::Registry::global().counter(name, "", {{"pool", pool}}).value()
             : obs::Registry::global().gauge(name, "", {{"pool", pool}}).value();
}

TEST_F(CloudPoolTest, EveryMemberOpenIsPanicOneCallPerRequestNeverARefusal) {
  FakeUpstream a;
  FakeUpstream b;
  a.reply_always(server_error());
  b.reply_always(server_error());
  const std::string name = "cloud-large-all-open";
  auto p = pool({member(a, "a"), member(b, "b")}, {}, name);
  ASSERT_TRUE(p);
  // Each member opens at its 5th failure in a row.
  for (int i = 0; i < 10 && !p->in_panic(); ++i) {
    auto reply = complete(*p);
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.error().kind, UpstreamErrorKind::server_error) << i;
  }
  ASSERT_EQ(p->breaker(0).state(Clock::now()), BreakerState::open);
  ASSERT_EQ(p->breaker(1).state(Clock::now()), BreakerState::open);
  EXPECT_TRUE(p->in_panic());
  EXPECT_EQ(metric("hengshi_pool_members_open_share", name), 1.0);
  const double panics = metric("hengshi_breaker_panic_total", name);
  const auto requests = a.requests().size() + b.requests().size();

  // In panic every call still reaches a member, marked so the chain makes it one attempt.
  for (int i = 0; i < 4; ++i) {
    auto reply = complete(*p);
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.error().kind, UpstreamErrorKind::server_error);
    EXPECT_TRUE(reply.error().member_open);
  }
  auto streamed = stream(*p);
  ASSERT_FALSE(streamed.ok());
  EXPECT_TRUE(streamed.error().member_open);
  EXPECT_EQ(a.requests().size() + b.requests().size(), requests + 5);
  EXPECT_EQ(metric("hengshi_breaker_panic_total", name), panics + 5);

  // `b` recovers: the first call it answers closes its breaker and the panic ends.
  b.reply_always(FakeReply{});
  for (int i = 0; i < 20 && p->in_panic(); ++i) (void)complete(*p);
  EXPECT_EQ(p->breaker(1).state(Clock::now()), BreakerState::closed);
  EXPECT_FALSE(p->in_panic());
  EXPECT_EQ(metric("hengshi_pool_members_open_share", name), 0.5);
  for (int i = 0; i < 5; ++i) {
    auto reply = complete(*p);
    ASSERT_TRUE(reply.ok());
    EXPECT_EQ(reply->upstream, "b");
  }
}

TEST_F(CloudPoolTest, StreamFailingAfterTheFirstChunkCountsAsAFailureAndMakesTheMemberFlaky) {
  FakeUpstream a;
  FakeReply cut;
  cut.stream = true;
  cut.events = {
      R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]})"};
  cut.close_mid_stream = true;
  a.reply_always(cut);
  auto p = pool({member(a, "a")});
  ASSERT_TRUE(p);
  std::vector<bool> flaky;
  CallOptions options;
  options.on_chosen = [&flaky](bool stream_flaky) { flaky.push_back(stream_flaky); };
  for (int i = 0; i < 5; ++i) {
    auto summary = stream(*p, options);
    ASSERT_FALSE(summary.ok());
    EXPECT_EQ(summary.error().kind, UpstreamErrorKind::closed_early);
    EXPECT_TRUE(summary.error().after_first_byte);
  }
  EXPECT_EQ(p->breaker(0).state(Clock::now()), BreakerState::open);
  // A one-member pool whose member is open is in panic: the call is made, as one attempt.
  auto in_panic = stream(*p, options);
  ASSERT_FALSE(in_panic.ok());
  EXPECT_TRUE(in_panic.error().member_open);
  EXPECT_EQ(a.requests().size(), 6u);
  EXPECT_EQ(flaky, std::vector<bool>(6, true));
}

TEST_F(CloudPoolTest, AHealthyStreamMakesTheMemberTrusted) {
  FakeUpstream a;
  FakeReply ok;
  ok.stream = true;
  ok.events = {R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"}}]})"};
  a.reply_always(ok);
  auto p = pool({member(a, "a")});
  ASSERT_TRUE(p);
  std::vector<bool> flaky;
  CallOptions options;
  options.on_chosen = [&flaky](bool stream_flaky) { flaky.push_back(stream_flaky); };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(stream(*p, options).ok());
  // Nothing was known before the first stream finished; after it the member is trusted.
  EXPECT_EQ(flaky, (std::vector<bool>{true, false, false}));
}

TEST_F(CloudPoolTest, ClientErrorsDoNotOpenTheBreaker) {
  FakeUpstream a;
  FakeReply rejected;
  rejected.status = 400;
  rejected.body = R"({"error":{"message":"bad request","type":"invalid_request_error"}})";
  a.reply_always(rejected);
  auto p = pool({member(a, "a")});
  ASSERT_TRUE(p);
  for (int i = 0; i < 15; ++i) {
    auto reply = complete(*p);
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.error().kind, UpstreamErrorKind::client_error);
  }
  EXPECT_EQ(p->breaker(0).state(Clock::now()), BreakerState::closed);
  EXPECT_EQ(a.requests().size(), 15u);
  EXPECT_EQ(p->members()[0]->latency_ewma_us(), 0.0);  // no penalty either
}

TEST_F(CloudPoolTest, FailingFastIsPenalisedInTheLatencyScore) {
  FakeUpstream a;
  FakeUpstream b;
  a.reply_always(server_error());
  auto p = pool({member(a, "a"), member(b, "b")});
  ASSERT_TRUE(p);
  ASSERT_TRUE(complete(*p, {{"a"}}).ok());  // b measured: a fast loopback answer
  const double healthy_us = p->members()[1]->latency_ewma_us();
  ASSERT_GT(healthy_us, 0.0);
  ASSERT_FALSE(complete(*p, {{"b"}}).ok());  // a fails in well under a millisecond or so
  // The penalty: at least ttft_timeout_ms (5 s), however fast the failure was.
  EXPECT_GE(p->members()[0]->latency_ewma_us(), 5'000'000.0);
  // So p2c (both compared with two members) sends the next calls to b.
  for (int i = 0; i < 8; ++i) {
    auto reply = complete(*p);
    ASSERT_TRUE(reply.ok()) << reply.error().message;
    EXPECT_EQ(reply->upstream, "b");
  }
  EXPECT_EQ(a.requests().size(), 1u);
}

TEST_F(CloudPoolTest, ASpentDeadlineCallsNoMemberAndCountsAgainstNone) {
  FakeUpstream a;
  auto p = pool({member(a, "a")});
  ASSERT_TRUE(p);
  for (int i = 0; i < 12; ++i) {
    auto reply = run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
      co_return co_await p->complete(kRequest, Deadline(Clock::now() - 1ms), CancelToken{});
    });
    ASSERT_FALSE(reply.ok());
    EXPECT_EQ(reply.error().kind, UpstreamErrorKind::total_timeout);
    EXPECT_EQ(reply.error().upstream, "");
  }
  EXPECT_EQ(p->breaker(0).state(Clock::now()), BreakerState::closed);
  EXPECT_EQ(a.accepted(), 0);
  EXPECT_TRUE(complete(*p).ok());
}

TEST_F(CloudPoolTest, BreakerDisabledNeverOpens) {
  FakeUpstream a;
  a.reply_always(server_error());
  ChainConfig chain;
  chain.breaker.enabled = false;
  auto p = pool({member(a, "a")}, chain);
  ASSERT_TRUE(p);
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(complete(*p).error().kind, UpstreamErrorKind::server_error);
  EXPECT_EQ(a.requests().size(), 12u);
}

TEST_F(CloudPoolTest, FullBulkheadFailsFastAsOverloaded) {
  FakeUpstream a;
  ChainConfig chain;
  chain.bulkheads["cloud-tiny"] = BulkheadConfig{1, 0, 1000};
  auto p = pool({member(a, "a")}, chain, "cloud-tiny");
  ASSERT_TRUE(p);
  CancelToken cancel;
  bool arrived = false;
  asio::steady_timer arrival(strand_, Clock::time_point::max());
  a.set_handler([&](const FakeRequest&) {
    asio::post(strand_, [&] {
      arrived = true;
      arrival.cancel();
    });
    FakeReply reply;
    reply.hang = true;
    return reply;
  });
  auto refused = run([&]() -> awaitable<Result<UpstreamReply, UpstreamError>> {
    asio::co_spawn(
        strand_,
        [&]() -> awaitable<void> {
          auto ignored = co_await p->complete(kRequest, Deadline::after(10s), cancel);
        },
        asio::detached);
    arrival.expires_after(5s);
    beast::error_code ec;
    co_await arrival.async_wait(asio::redirect_error(use_awaitable, ec));
    EXPECT_TRUE(arrived);
    EXPECT_EQ(p->bulkhead().in_use(), 1);
    auto result = co_await p->complete(kRequest, Deadline::after(10s), CancelToken{});
    cancel.cancel();
    co_return result;
  });
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, UpstreamErrorKind::overloaded);
  EXPECT_EQ(refused.error().retry_after_ms, 1000);
  EXPECT_NE(refused.error().message.find("bulkhead"), std::string::npos);
  EXPECT_NE(refused.error().message.find("cloud-tiny"), std::string::npos);
  EXPECT_EQ(p->bulkhead().in_use(), 0);  // the cancelled call gave its permit back
  EXPECT_EQ(a.requests().size(), 1u);
}

}  // namespace
}  // namespace hengshi::cloud
