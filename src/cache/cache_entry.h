// One cached answer and what it was the answer to. Immutable once stored (hits and recency are
// kept beside it by the store), so a hit hands out a shared pointer without copying.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cache/hit_guards.h"

namespace hengshi::cache {

struct CachedAnswer {
  std::string content;
  std::string model;                  // the model that produced it
  std::string finish_reason = "stop";
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
  std::string source;                 // the route or pool that answered (cloud-small, edge, ...)
  std::string model_version;          // the answering model's version, when it has one
};

struct CacheEntry {
  std::uint64_t id = 0;      // random per entry: unique across a fleet sharing Redis
  std::uint64_t scope = 0;   // scope_hash() of the request
  std::uint64_t key = 0;     // exact_key(): scope + canonical question
  std::string task_type;
  std::string question;      // normalised (NFKC, case-folded): what the guards and embedder read
  GuardFeatures features;
  std::string embedder;      // Embedder::name() of `vector` ("" = exact tier only)
  std::vector<float> vector;
  CachedAnswer answer;
  std::vector<std::string> tags;
  std::int64_t created_ms = 0;  // system clock, ms since the epoch (shared with other instances)
  std::int64_t expires_ms = 0;

  // Approximate memory the entry holds, for the byte bounds.
  std::size_t bytes() const {
    std::size_t total = sizeof(CacheEntry) + question.size() + answer.content.size() + answer.model.size() +
                        answer.source.size() + answer.model_version.size() + task_type.size() +
                        vector.size() * sizeof(float) + features.numbers.size() * 32 + 160;
    for (const auto& tag : tags) total += tag.size() + 32;
    return total;
  }
};

}  // namespace hengshi::cache
