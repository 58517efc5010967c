// Per-key limits: requests per minute, tokens per minute (token buckets that refill
// continuously) and a spend budget. The clock is passed in (`now`), so tests drive time without
// sleeping. TPM and spend are charged after the answer with the real usage, so a bucket may go
// into debt; a key in debt is refused until the bucket refills above zero.
//
// Thread-safety: KeyLimits is safe from any thread (one mutex; the work under it is a few
// arithmetic operations). State is keyed by key NAME, so it survives a keys-file reload and a
// limit changed by a reload applies from the next request.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "server/key_store.h"

namespace hengshi::server {

using LimitClock = std::chrono::steady_clock;

class TokenBucket {
 public:
  // Capacity `per_minute`, refilled at per_minute / 60 per second; a new bucket starts full.
  void set_rate(double per_minute, LimitClock::time_point now);
  double level(LimitClock::time_point now);
  void take(double amount, LimitClock::time_point now);
  // Whole seconds (≥ 1) until the level reaches `wanted`.
  std::int64_t seconds_until(double wanted, LimitClock::time_point now);

 private:
  void refill(LimitClock::time_point now);
  double per_minute_ = 0;
  double level_ = 0;
  bool started_ = false;
  LimitClock::time_point updated_{};
};

struct Admission {
  bool allowed = true;
  std::string limit;               // rpm | tpm | budget when refused
  std::int64_t retry_after_s = 0;  // for rpm/tpm
};

class KeyLimits {
 public:
  // Checks budget, TPM and RPM; an admitted request takes one from the key's RPM bucket.
  Admission admit(const ClientKey& key, LimitClock::time_point now);
  // After the answer: the tokens it used and what it cost.
  void charge(const ClientKey& key, std::int64_t tokens, double cost, LimitClock::time_point now);
  double spent(const std::string& key_name) const;

 private:
  struct State {
    TokenBucket requests;
    TokenBucket tokens;
    double spent = 0;
  };
  mutable std::mutex mutex_;
  std::map<std::string, State> states_;
};

}  // namespace hengshi::server
