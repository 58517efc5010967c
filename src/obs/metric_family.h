// MetricFamily: a labelled counter or histogram family whose label values come per call (route,
// reason, status…), resolved to its series once per distinct combination. Registry::counter()
// builds the name, help and label strings and walks two maps under a lock on every call; on the
// request path that was a dozen allocations per metric. Series never leave the registry, so a
// resolved pointer stays valid.
//
// Thread-safe: a small lock guards the combination → series map; each thread keeps its last
// resolutions in a small table of its own, so a known combination costs neither.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/byte_word.h"
#include "obs/metrics.h"

namespace hengshi::obs {

template <typename Metric>
class MetricFamily {
 public:
  MetricFamily(std::string name, std::string help, std::vector<std::string> label_names)
      : name_(std::move(name)), help_(std::move(help)), label_names_(std::move(label_names)) {}
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  // The series for these label values, in the order of the label names.
  Metric& at(std::initializer_list<std::string_view> values) {
    if (values.size() != label_names_.size()) throw std::logic_error("metric " + name_ + ": wrong label count");
    // This thread's recent resolutions, looked at first, without building a key, taking the lock
    // or hashing: a request resolves the same handful of combinations every time. A slot is
    // keyed by the family's id, not its address, which a later family may reuse.
    std::size_t bytes = 0;
    for (std::string_view value : values) bytes += value.size();
    const std::string_view last = values.size() == 0 ? std::string_view() : *(values.end() - 1);
    // Mixed (not summed): with a sum, two combinations a request resolves every time shared a
    // slot often enough that half the requests took the locked path once.
    std::uint64_t mix =
        (id_ * 0x9E3779B97F4A7C15ULL) ^ (bytes * 0xC2B2AE3D27D4EB4FULL) ^
        (last.empty() ? 0 : static_cast<unsigned char>(last.back()) * 0x165667B19E3779F9ULL);
    mix ^= mix >> 29;
    Hit& hit = hits[mix % kHits];
    if (hit.family == id_ && holds(std::string_view(hit.key, hit.size), values)) return *hit.metric;

    // Length-prefixed, so caller-chosen values (a task type) cannot make two combinations collide.
    // One buffer per thread, cleared but not freed: a key outgrows the short-string buffer.
    thread_local std::string key;
    key.clear();
    for (std::string_view value : values) {
      const auto size = static_cast<std::uint32_t>(value.size());
      key.append(reinterpret_cast<const char*>(&size), sizeof size);
      key.append(value);
    }
    Metric* metric = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (auto found = series_.find(key); found != series_.end()) {
        metric = found->second;
      } else {
        Labels labels;
        auto value = values.begin();
        for (const auto& label : label_names_) labels.emplace_back(label, std::string(*value++));
        metric = &resolve(labels);
        series_.emplace(key, metric);
      }
    }
    if (key.size() <= kMaxHitKey) {  // a longer combination is resolved under the lock each time
      hit.family = id_;
      hit.size = static_cast<std::uint32_t>(key.size());
      std::memcpy(hit.key, key.data(), key.size());
      hit.metric = metric;
    }
    return *metric;
  }

 private:
  // Whether `key` (length-prefixed, as at() builds it) is these values.
  // Reads the prefixes as integers and compares bytes only when the sizes agree: every request
  // makes a dozen of these checks, and a hit is the usual case.
  static bool holds(std::string_view key, std::initializer_list<std::string_view> values) {
    const char* at = key.data();
    const char* const end = key.data() + key.size();
    for (std::string_view value : values) {
      std::uint32_t size = 0;
      if (static_cast<std::size_t>(end - at) < sizeof size) return false;
      std::memcpy(&size, at, sizeof size);
      at += sizeof size;
      if (size != value.size() || static_cast<std::size_t>(end - at) < size) return false;
      if (!same_bytes(at, value.data(), size)) return false;
      at += size;
    }
    return at == end;
  }

  // Labels are short names: two overlapping word loads compare up to 16 bytes without a call
  // (memcmp was a third of a lookup's cost).
  static bool same_bytes(const char* a, const char* b, std::size_t n) {
    auto load4 = [](const char* p) {
      std::uint32_t word;
      std::memcpy(&word, p, sizeof word);
      return word;
    };
    if (n >= 8) {
      if (n > 16) return std::memcmp(a, b, n) == 0;
      return load_word(a) == load_word(b) && load_word(a + n - 8) == load_word(b + n - 8);
    }
    if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
    for (std::size_t i = 0; i < n; ++i) {
      if (a[i] != b[i]) return false;
    }
    return true;
  }

  // A slot holds its key inline, so the table is constant-initialised: a thread_local with a
  // dynamic constructor (a std::string member) is reached through an init check on every call.
  static constexpr std::size_t kMaxHitKey = 120;
  struct Hit {
    std::uint64_t family = 0;  // 0: empty
    Metric* metric = nullptr;
    std::uint32_t size = 0;
    char key[kMaxHitKey] = {};
  };
  static constexpr std::size_t kHits = 256;
  static thread_local std::array<Hit, kHits> hits;
  static std::uint64_t next_id() {
    static std::atomic<std::uint64_t> last{0};
    return ++last;
  }

  Metric& resolve(const Labels& labels);

  const std::uint64_t id_ = next_id();

  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::mutex mutex_;
  std::unordered_map<std::string, Metric*> series_;
};

template <typename Metric>
thread_local std::array<typename MetricFamily<Metric>::Hit, MetricFamily<Metric>::kHits>
    MetricFamily<Metric>::hits{};

template <>
inline Counter& MetricFamily<Counter>::resolve(const Labels& labels) {
  return Registry::global().counter(name_, help_, labels);
}

template <>
inline Histogram& MetricFamily<Histogram>::resolve(const Labels& labels) {
  return Registry::global().histogram(name_, help_, labels);
}

using CounterFamily = MetricFamily<Counter>;
using HistogramFamily = MetricFamily<Histogram>;

}  // namespace hengshi::obs
