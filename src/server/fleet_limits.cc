#include "server/fleet_limits.h"

#include <chrono>
#include <cmath>
#include <cstdio>

namespace hengshi::server {
namespace {

// KEYS: this minute's requests, this minute's tokens, the spend. ARGV: rpm, tpm, budget (-1 =
// none), the window's lifetime (ms), seconds to the window's end. → {admitted, limit, retry_s}
constexpr const char* kAdmit = R"lua(
local requests = tonumber(redis.call('GET', KEYS[1]) or '0')
local tokens = tonumber(redis.call('GET', KEYS[2]) or '0')
local spent = tonumber(redis.call('GET', KEYS[3]) or '0')
local rpm, tpm, budget = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
if budget >= 0 and spent >= budget then return {0, 'budget', 0} end
if tpm > 0 and tokens >= tpm then return {0, 'tpm', tonumber(ARGV[5])} end
if rpm > 0 and requests >= rpm then return {0, 'rpm', tonumber(ARGV[5])} end
redis.call('INCR', KEYS[1])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, '', 0}
)lua";

std::int64_t system_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6f", value);
  return text;
}

}  // namespace

FleetLimits::FleetLimits(cache::RedisClient& redis, int fleet_size)
    : redis_(redis), fleet_size_(std::max(1, fleet_size)), now_s_(system_seconds) {}

ClientKey FleetLimits::local_share(const ClientKey& key) const {
  ClientKey share = key;
  if (share.rpm > 0) share.rpm = std::max<std::int64_t>(1, share.rpm / fleet_size_);
  if (share.tpm > 0) share.tpm = std::max<std::int64_t>(1, share.tpm / fleet_size_);
  if (share.budget) *share.budget /= fleet_size_;
  return share;
}

awaitable<Admission> FleetLimits::admit(const ClientKey& key) {
  if (key.rpm == 0 && key.tpm == 0 && !key.budget) co_return Admission{};
  const std::int64_t now = now_s_();
  const std::string minute = std::to_string(now / 60);
  const std::string base = redis_.prefix() + "l:" + key.name + ":";
  std::vector<std::string> argv = {"EVAL",
                                   kAdmit,
                                   "3",
                                   base + "r:" + minute,
                                   base + "t:" + minute,
                                   base + "spent",
                                   std::to_string(key.rpm),
                                   std::to_string(key.tpm),
                                   key.budget ? number(*key.budget) : "-1",
                                   "120000",
                                   std::to_string(60 - now % 60)};
  std::string op = "limits";
  auto reply = co_await redis_.async_call(std::move(argv), std::move(op));
  if (reply && reply->type == cache::RedisReply::Type::array && reply->elements.size() == 3) {
    shared_ = true;
    Admission admission;
    admission.allowed = reply->elements[0].integer == 1;
    admission.limit = reply->elements[1].text;
    admission.retry_after_s = std::max<std::int64_t>(1, reply->elements[2].integer);
    if (admission.allowed) admission.retry_after_s = 0;
    co_return admission;
  }
  // Redis down or slow: this instance's share of each limit.
  shared_ = false;
  co_return local_.admit(local_share(key), LimitClock::now());
}

void FleetLimits::charge(const ClientKey& key, std::int64_t tokens, double cost) {
  local_.charge(local_share(key), tokens, cost, LimitClock::now());
  if (tokens <= 0 && cost <= 0) return;
  const std::int64_t now = now_s_();
  const std::string base = redis_.prefix() + "l:" + key.name + ":";
  const std::string tokens_key = base + "t:" + std::to_string(now / 60);
  redis_.post_pipeline({{"INCRBY", tokens_key, std::to_string(tokens)},
                        {"PEXPIRE", tokens_key, "120000"},
                        {"INCRBYFLOAT", base + "spent", number(cost)}},
                       "limits");
}

}  // namespace hengshi::server
