// SessionTracker: a bounded memory of recent turns per chat session, so the router can keep a
// session's route steady instead of flipping edge ↔ cloud turn by turn.
//
// Thread-safe: sessions are spread by hash over shards, each with its own mutex, so concurrent
// requests of different sessions rarely contend. Memory is bounded by max_sessions (least
// recently recorded sessions are evicted first, per shard) and by ttl (an entry not recorded for
// ttl is treated as unknown and dropped lazily). Time is passed in, never read, so tests need no
// sleeps.
#pragma once

#include <chrono>
#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace hengshi::router {

struct SessionView {
  std::vector<int> recent_complexity;  // oldest first, at most `window` entries
  std::string last_route;              // e.g. "edge", "cloud-small"
  int turns = 0;
  int cloud_calls = 0;  // turns whose route started with "cloud"
  bool known = false;   // false: never seen, evicted or expired (everything else empty)
};

class SessionTracker {
 public:
  // max_sessions is split evenly over the shards (shards is clamped to [1, max_sessions]), so
  // eviction is least-recently-recorded within a shard; with shards = 1 it is exact LRU.
  explicit SessionTracker(std::size_t max_sessions = 100000,
                          std::chrono::seconds ttl = std::chrono::minutes(30),
                          std::size_t window = 3, std::size_t shards = 16);

  // A copy of the session's state. An entry last recorded ttl or more before `now` is expired:
  // known = false (and it is dropped). Viewing does not refresh the entry.
  SessionView view(std::string_view session_id, std::chrono::steady_clock::time_point now) const;

  // Records one turn: appends `complexity` (keeping the last `window`), sets last_route,
  // turns += 1, cloud_calls += 1 when `route` starts with "cloud". An expired entry starts over.
  // Empty session ids are ignored (nothing to remember them by). Returns the session's
  // cloud_calls after this turn (0 for an ignored id), so a caller need not look it up again.
  int record(std::string_view session_id, int complexity, std::string_view route,
             std::chrono::steady_clock::time_point now);

  // Entries held, expired ones not yet dropped included.
  std::size_t size() const;

 private:
  struct Entry {
    std::string session_id;
    std::vector<int> recent_complexity;
    std::string last_route;
    int turns = 0;
    int cloud_calls = 0;
    std::chrono::steady_clock::time_point last_seen;
  };
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view text) const {
      return std::hash<std::string_view>{}(text);
    }
  };
  struct Shard {
    std::mutex mutex;
    std::list<Entry> lru;  // most recently recorded first
    std::unordered_map<std::string, std::list<Entry>::iterator, StringHash, std::equal_to<>> index;
    std::size_t capacity = 0;
  };

  Shard& shard_for(std::string_view session_id) const;
  bool expired(const Entry& entry, std::chrono::steady_clock::time_point now) const;
  // Drops expired entries from the LRU tail (the least recently recorded). Caller holds the lock.
  void drop_expired_tail(Shard& shard, std::chrono::steady_clock::time_point now) const;

  std::chrono::seconds ttl_;
  std::size_t window_;
  std::unique_ptr<Shard[]> shards_;  // mutable state behind per-shard mutexes
  std::size_t shard_count_;
};

// Mean of recent_complexity; 0 when empty.
double mean_complexity(const SessionView& view);

}  // namespace hengshi::router
