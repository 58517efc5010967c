#include "router/session_tracker.h"

#include <algorithm>
#include <numeric>

namespace hengshi::router {

SessionTracker::SessionTracker(std::size_t max_sessions, std::chrono::seconds ttl,
                               std::size_t window, std::size_t shards)
    : ttl_(ttl),
      window_(std::max<std::size_t>(window, 1)),
      shard_count_(std::clamp<std::size_t>(shards, 1, std::max<std::size_t>(max_sessions, 1))) {
  shards_ = std::make_unique<Shard[]>(shard_count_);
  // Capacities add up to exactly max_sessions (at least 1 each).
  for (std::size_t i = 0; i < shard_count_; ++i) {
    shards_[i].capacity =
        std::max<std::size_t>(max_sessions / shard_count_ + (i < max_sessions % shard_count_), 1);
  }
}

SessionTracker::Shard& SessionTracker::shard_for(std::string_view session_id) const {
  return shards_[StringHash{}(session_id) % shard_count_];
}

bool SessionTracker::expired(const Entry& entry, std::chrono::steady_clock::time_point now) const {
  return now - entry.last_seen >= ttl_;
}

void SessionTracker::drop_expired_tail(Shard& shard,
                                       std::chrono::steady_clock::time_point now) const {
  while (!shard.lru.empty() && expired(shard.lru.back(), now)) {
    shard.index.erase(shard.lru.back().session_id);
    shard.lru.pop_back();
  }
}

SessionView SessionTracker::view(std::string_view session_id,
                                 std::chrono::steady_clock::time_point now) const {
  Shard& shard = shard_for(session_id);
  std::lock_guard lock(shard.mutex);
  const auto it = shard.index.find(session_id);
  if (it == shard.index.end()) return SessionView{};
  const Entry& entry = *it->second;
  if (expired(entry, now)) {
    shard.lru.erase(it->second);
    shard.index.erase(it);
    return SessionView{};
  }
  return SessionView{entry.recent_complexity, entry.last_route, entry.turns, entry.cloud_calls,
                     true};
}

int SessionTracker::record(std::string_view session_id, int complexity, std::string_view route,
                           std::chrono::steady_clock::time_point now) {
  if (session_id.empty()) return 0;
  Shard& shard = shard_for(session_id);
  std::lock_guard lock(shard.mutex);
  drop_expired_tail(shard, now);
  auto it = shard.index.find(session_id);
  if (it != shard.index.end() && expired(*it->second, now)) {
    // Out-of-order times can leave an expired entry before the tail; it starts over.
    shard.lru.erase(it->second);
    shard.index.erase(it);
    it = shard.index.end();
  }
  if (it == shard.index.end()) {
    while (shard.lru.size() >= shard.capacity) {
      shard.index.erase(shard.lru.back().session_id);
      shard.lru.pop_back();
    }
    shard.lru.push_front(Entry{std::string(session_id), {}, {}, 0, 0, now});
    it = shard.index.emplace(shard.lru.front().session_id, shard.lru.begin()).first;
  } else {
    shard.lru.splice(shard.lru.begin(), shard.lru, it->second);  // iterators stay valid
  }
  Entry& entry = *it->second;
  entry.recent_complexity.push_back(complexity);
  if (entry.recent_complexity.size() > window_) {
    entry.recent_complexity.erase(entry.recent_complexity.begin());
  }
  entry.last_route.assign(route);
  entry.turns += 1;
  if (route.starts_with("cloud")) entry.cloud_calls += 1;
  entry.last_seen = std::max(entry.last_seen, now);
  return entry.cloud_calls;
}

std::size_t SessionTracker::size() const {
  std::size_t total = 0;
  for (std::size_t i = 0; i < shard_count_; ++i) {
    std::lock_guard lock(shards_[i].mutex);
    total += shards_[i].lru.size();
  }
  return total;
}

double mean_complexity(const SessionView& view) {
  if (view.recent_complexity.empty()) return 0;
  const double sum =
      std::accumulate(view.recent_complexity.begin(), view.recent_complexity.end(), 0.0);
  return sum / static_cast<double>(view.recent_complexity.size());
}

}  // namespace hengshi::router
