#include "cache/answer_cache.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "cache/redis_tier.h"

namespace hengshi::cache {
namespace {

constexpr std::size_t kNeighbours = 8;        // semantic candidates checked per lookup
constexpr std::size_t kEvictionSample = 16;   // cold entries compared per eviction
constexpr std::int64_t kSweepEveryMs = 10'000;

}  // namespace

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* to_string(CacheTier tier) {
  switch (tier) {
    case CacheTier::exact:
      return "exact";
    case CacheTier::semantic:
      return "semantic";
    case CacheTier::stale:
      return "stale";
  }
  return "exact";
}

AnswerCache::AnswerCache(const CacheConfig& config, std::shared_ptr<const Embedder> embedder, TextForms forms,
                         std::unique_ptr<RedisTier> redis, obs::Registry& registry)
    : config_(config),
      clock_(now_ms),
      embedder_(config.semantic ? std::move(embedder) : nullptr),
      forms_(std::move(forms)),
      redis_(std::move(redis)),
      metrics_(registry),
      random_(std::random_device{}()) {
  if (!forms_.normalize) forms_.normalize = [](std::string_view text) { return std::string(text); };
  if (!forms_.canonical) forms_.canonical = forms_.normalize;
  metrics_.set_sizes(0, 0, 0, 0);
  if (redis_) redis_->attach(*this, metrics_);
}

AnswerCache::~AnswerCache() {
  if (redis_) redis_->stop();
  embed_thread_.join();
}

void AnswerCache::start() {
  if (redis_) redis_->start();
}

namespace {

std::int64_t code_points(std::string_view utf8) {
  return std::count_if(utf8.begin(), utf8.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; });
}

}  // namespace

CacheQuery AnswerCache::query(const ChatRequest& request, const ScopeParts& scope, const std::string& intent) const {
  CacheQuery query;
  query.scope = scope_hash(request, scope);
  const std::string question = request.last_user_text();
  query.question = forms_.normalize(question);
  query.key = exact_key(query.scope, forms_.canonical(question));
  query.task_type = std::string(scope.task_type);
  query.threshold = config_.threshold_for(query.task_type);
  query.verify_band = config_.verify_band;
  query.semantic = embedder_ != nullptr && (config_.semantic_max_chars == 0 ||
                                            code_points(question) <= config_.semantic_max_chars);
  query.ttl_s = config_.ttl_for(query.task_type);
  query.tags = request.hengshi.tags;
  if (!intent.empty()) {
    query.intent = intent;
    query.tags.push_back("intent:" + intent);
  }
  return query;
}

std::optional<std::vector<float>> AnswerCache::embed(const std::string& question) const {
  if (!embedder_) return std::nullopt;
  try {
    auto vector = embedder_->embed(question);
    if (!vector) return std::nullopt;
    return std::move(*vector);
  } catch (const std::exception& error) {
    spdlog::warn("cache: embedding failed: {}", error.what());
    return std::nullopt;
  }
}

awaitable<std::optional<std::vector<float>>> AnswerCache::embed_awaited(std::string question) {
  if (!embedder_->expensive()) co_return embed(question);
  // The result is handed back on the awaiting coroutine's executor, kept alive until then.
  auto initiation = [this, question = std::move(question)](auto handler) mutable {
    auto executor =
        asio::prefer(asio::get_associated_executor(handler), asio::execution::outstanding_work.tracked);
    asio::post(embed_thread_, [this, handler = std::move(handler), executor, question = std::move(question)]() mutable {
      auto vector = std::make_shared<std::optional<std::vector<float>>>(embed(question));
      asio::post(executor, [handler = std::move(handler), vector]() mutable { handler(std::move(*vector)); });
    });
  };
  co_return co_await asio::async_initiate<decltype(use_awaitable), void(std::optional<std::vector<float>>)>(
      std::move(initiation), use_awaitable);
}

awaitable<std::optional<CacheHit>> AnswerCache::lookup(CacheQuery& query) {
  const std::int64_t now = clock_();
  {
    std::lock_guard lock(mutex_);
    if (auto hit = exact_locked(query, now)) {
      ++hits_;
      metrics_.hit("exact", query.task_type);
      co_return hit;
    }
  }
  if (redis_) {
    // Another instance may have answered this exact question.
    if (auto entry = co_await redis_->fetch_by_key(query.key); entry && (*entry)->expires_ms > now) {
      std::shared_ptr<CacheEntry> stored = *entry;
      insert_local(stored);
      std::lock_guard lock(mutex_);
      ++hits_;
      metrics_.hit("exact", query.task_type);
      co_return CacheHit{CacheTier::exact, stored, 1.0f, true};
    }
  }
  if (query.semantic) {
    if (!query.vector) query.vector = co_await embed_awaited(query.question);
    if (query.vector) {
      std::lock_guard lock(mutex_);
      if (auto hit = semantic_locked(query, now)) {
        ++hits_;
        metrics_.hit("semantic", query.task_type);
        co_return hit;
      }
    }
  }
  std::lock_guard lock(mutex_);
  ++misses_;
  metrics_.miss(query.task_type);
  co_return std::nullopt;
}

std::optional<CacheHit> AnswerCache::exact_locked(const CacheQuery& query, std::int64_t now) {
  auto key = by_key_.find(query.key);
  if (key == by_key_.end()) return std::nullopt;
  const std::uint64_t id = key->second;
  auto slot = slots_.find(id);
  if (slot == slots_.end()) return std::nullopt;
  const auto entry = slot->second.entry;
  if (entry->expires_ms <= now) {
    if (entry->expires_ms + config_.stale_if_error_s * 1000 <= now) remove_locked(id);
    return std::nullopt;
  }
  touch_locked(slot->second, id, now);
  return CacheHit{CacheTier::exact, entry, 1.0f, false};
}

std::optional<CacheHit> AnswerCache::semantic_locked(const CacheQuery& query, std::int64_t now) {
  auto index = indexes_.find(query.scope);
  if (index == indexes_.end() || index->second->size() == 0) return std::nullopt;
  thread_local std::vector<SemanticIndex::Neighbour> neighbours;
  index->second->nearest(*query.vector, kNeighbours, neighbours);
  const GuardFeatures features = guard_features(query.question);
  const double floor = query.threshold - query.verify_band;
  for (const auto& neighbour : neighbours) {
    if (neighbour.similarity < floor) break;  // most similar first
    auto slot = slots_.find(neighbour.id);
    if (slot == slots_.end()) continue;
    const auto& entry = slot->second.entry;
    if (entry->expires_ms <= now || entry->embedder != embedder_->name()) continue;
    if (auto guard = guard_rejects(features, entry->features)) {
      metrics_.guard_rejected(to_string(*guard));
      continue;
    }
    if (!query.intent.empty() &&
        std::find(entry->tags.begin(), entry->tags.end(), "intent:" + query.intent) == entry->tags.end()) {
      metrics_.guard_rejected(to_string(Guard::intent));
      continue;
    }
    const bool borderline = neighbour.similarity < query.threshold;
    if (!borderline) touch_locked(slot->second, neighbour.id, now);  // a borderline one is not used yet
    return CacheHit{CacheTier::semantic, entry, neighbour.similarity, false, borderline};
  }
  return std::nullopt;
}

std::optional<CacheHit> AnswerCache::stale(const CacheQuery& query) {
  if (config_.stale_if_error_s <= 0) return std::nullopt;
  const std::int64_t now = clock_();
  std::lock_guard lock(mutex_);
  auto key = by_key_.find(query.key);
  if (key == by_key_.end()) return std::nullopt;
  auto slot = slots_.find(key->second);
  if (slot == slots_.end()) return std::nullopt;
  const auto entry = slot->second.entry;
  // Fresh or expired, as long as it is within the stale window: the cloud just failed.
  if (entry->expires_ms + config_.stale_if_error_s * 1000 <= now) return std::nullopt;
  metrics_.hit("stale", query.task_type);
  return CacheHit{CacheTier::stale, entry, 1.0f, false};
}

std::shared_ptr<CacheEntry> AnswerCache::make_entry(CacheQuery& query, CachedAnswer answer) {
  auto entry = std::make_shared<CacheEntry>();
  entry->scope = query.scope;
  entry->key = query.key;
  entry->task_type = query.task_type;
  entry->question = query.question;
  entry->features = guard_features(query.question);
  if (query.semantic) {
    if (!query.vector) query.vector = embed(query.question);
    if (query.vector) {
      entry->embedder = embedder_->name();
      entry->vector = *query.vector;
    }
  }
  entry->answer = std::move(answer);
  entry->tags = query.tags;
  entry->created_ms = clock_();
  entry->expires_ms = entry->created_ms + query.ttl_s * 1000;
  return entry;
}

void AnswerCache::fill(CacheQuery& query, CachedAnswer answer) {
  try {
    // Built (and embedded) outside the lock; the id comes from the shared generator inside it.
    std::shared_ptr<CacheEntry> entry = make_entry(query, std::move(answer));
    std::lock_guard lock(mutex_);
    entry->id = random_();
    // Serialised for Redis (vector included) before the index takes the vector over.
    if (redis_) redis_->store(entry, config_.stale_if_error_s);
    insert_locked(entry, entry->created_ms);
    metrics_.filled(query.task_type);
  } catch (const std::exception& error) {
    spdlog::warn("cache: could not store an answer: {}", error.what());
  }
}

void AnswerCache::insert_local(std::shared_ptr<CacheEntry> entry) {
  std::lock_guard lock(mutex_);
  if (slots_.count(entry->id) != 0) return;  // already here (our own write, echoed back)
  try {
    insert_locked(std::move(entry), clock_());
  } catch (const std::exception& error) {
    spdlog::warn("cache: could not index an entry: {}", error.what());
  }
}

void AnswerCache::insert_locked(std::shared_ptr<CacheEntry> entry, std::int64_t now) {
  if (auto old = by_key_.find(entry->key); old != by_key_.end()) remove_locked(old->second);
  const std::uint64_t id = entry->id;
  bool indexed = false;
  if (!entry->vector.empty() && embedder_ && entry->embedder == embedder_->name()) {
    auto& index = indexes_[entry->scope];
    if (!index) index = std::make_unique<SemanticIndex>(embedder_->dim(), config_.rebuild_tombstone_share);
    index->add(id, entry->vector);
    indexed = true;
  }
  // The graph holds the vector now: the entry drops its copy (no reader has seen it yet).
  entry->vector = std::vector<float>();
  Slot slot;
  slot.entry = entry;
  slot.bucket = Bucket::hot;
  slot.last_use_ms = now;
  // The bounds count what the entry costs in the index too.
  slot.bytes = entry->bytes() + (indexed ? SemanticIndex::bytes_per_point(embedder_->dim()) : 0);
  hot_.push_front(id);
  slot.hot_position = hot_.begin();
  hot_bytes_ += slot.bytes;
  slots_.emplace(id, std::move(slot));
  by_key_[entry->key] = id;
  for (const auto& tag : entry->tags) by_tag_[tag].insert(id);
  enforce_bounds_locked(now);
  if (now - last_sweep_ms_ > kSweepEveryMs) sweep_locked(now);
  update_gauges_locked();
}

void AnswerCache::touch_locked(Slot& slot, std::uint64_t id, std::int64_t now) {
  ++slot.hits;
  slot.last_use_ms = now;
  if (slot.bucket == Bucket::hot) {
    hot_.splice(hot_.begin(), hot_, slot.hot_position);  // most recent first
    return;
  }
  // A cold entry in use again is hot again.
  const std::size_t position = slot.cold_position;
  cold_[position] = cold_.back();
  slots_[cold_[position]].cold_position = position;
  cold_.pop_back();
  cold_bytes_ -= slot.bytes;
  slot.bucket = Bucket::hot;
  hot_.push_front(id);
  slot.hot_position = hot_.begin();
  hot_bytes_ += slot.bytes;
  enforce_bounds_locked(now);
}

void AnswerCache::to_cold_locked(std::uint64_t id, Slot& slot) {
  hot_.erase(slot.hot_position);
  hot_bytes_ -= slot.bytes;
  slot.bucket = Bucket::cold;
  slot.cold_position = cold_.size();
  cold_.push_back(id);
  cold_bytes_ += slot.bytes;
}

void AnswerCache::enforce_bounds_locked(std::int64_t now) {
  const auto hot_entries = static_cast<std::size_t>(config_.hot.max_entries);
  const auto hot_bytes = static_cast<std::size_t>(config_.hot.max_bytes);
  const std::int64_t window_ms = config_.hot_window_s * 1000;
  // Hot keeps the recent: over its bounds, or unused for a whole window, the LRU end goes cold.
  while (!hot_.empty()) {
    const std::uint64_t oldest = hot_.back();
    Slot& slot = slots_[oldest];
    const bool over = hot_.size() > hot_entries || hot_bytes_ > hot_bytes;
    const bool aged = now - slot.last_use_ms > window_ms;
    if (!over && !aged) break;
    to_cold_locked(oldest, slot);
    if (over) {
      ++evictions_;
      metrics_.evicted("hot");
    }
  }
  while (!cold_.empty() && (cold_.size() > static_cast<std::size_t>(config_.cold.max_entries) ||
                            cold_bytes_ > static_cast<std::size_t>(config_.cold.max_bytes))) {
    evict_coldest_locked(now);
  }
}

void AnswerCache::evict_coldest_locked(std::int64_t now) {
  // The coldest of a random sample: few hits, long unused (the approximation Redis uses for LFU).
  const double window_ms = static_cast<double>(std::max<std::int64_t>(1, config_.hot_window_s) * 1000);
  // A small bucket is scanned whole; a large one sampled.
  const bool scan = cold_.size() <= kEvictionSample;
  std::uniform_int_distribution<std::size_t> pick(0, cold_.size() - 1);
  std::uint64_t coldest = cold_.front();
  double coldest_heat = 1e300;
  for (std::size_t i = 0; i < std::min(kEvictionSample, cold_.size()); ++i) {
    const std::uint64_t id = cold_[scan ? i : pick(random_)];
    const Slot& slot = slots_[id];
    const double heat =
        (1.0 + slot.hits) * std::exp(-static_cast<double>(now - slot.last_use_ms) / window_ms);
    if (heat < coldest_heat) {
      coldest_heat = heat;
      coldest = id;
    }
  }
  remove_locked(coldest);
  ++evictions_;
  metrics_.evicted("cold");
}

void AnswerCache::remove_locked(std::uint64_t id) {
  auto it = slots_.find(id);
  if (it == slots_.end()) return;
  Slot& slot = it->second;
  const auto entry = slot.entry;
  if (slot.bucket == Bucket::hot) {
    hot_.erase(slot.hot_position);
    hot_bytes_ -= slot.bytes;
  } else {
    const std::size_t position = slot.cold_position;
    const std::uint64_t last = cold_.back();
    cold_[position] = last;
    if (last != id) slots_[last].cold_position = position;
    cold_.pop_back();
    cold_bytes_ -= slot.bytes;
  }
  if (auto key = by_key_.find(entry->key); key != by_key_.end() && key->second == id) by_key_.erase(key);
  for (const auto& tag : entry->tags) {
    auto tagged = by_tag_.find(tag);
    if (tagged == by_tag_.end()) continue;
    tagged->second.erase(id);
    if (tagged->second.empty()) by_tag_.erase(tagged);
  }
  if (auto index = indexes_.find(entry->scope); index != indexes_.end()) {
    index->second->remove(id);
    if (index->second->size() == 0) indexes_.erase(index);
  }
  slots_.erase(it);
}

void AnswerCache::sweep_locked(std::int64_t now) {
  last_sweep_ms_ = now;
  const std::int64_t stale_ms = config_.stale_if_error_s * 1000;
  std::vector<std::uint64_t> gone;
  for (const auto& [id, slot] : slots_) {
    if (slot.entry->expires_ms + stale_ms <= now) gone.push_back(id);
  }
  for (std::uint64_t id : gone) remove_locked(id);
}

void AnswerCache::update_gauges_locked() {
  std::size_t index_bytes = 0;
  for (const auto& [scope, index] : indexes_) index_bytes += index->bytes();
  // The index grows with every entry, hot or cold: its bytes are shown with the cold bucket.
  metrics_.set_sizes(hot_.size(), hot_bytes_, cold_.size(), cold_bytes_ + index_bytes);
}

std::size_t AnswerCache::invalidate_local(const std::vector<std::string>& tags) {
  std::lock_guard lock(mutex_);
  std::unordered_set<std::uint64_t> ids;
  for (const auto& tag : tags) {
    auto tagged = by_tag_.find(tag);
    if (tagged != by_tag_.end()) ids.insert(tagged->second.begin(), tagged->second.end());
  }
  for (std::uint64_t id : ids) remove_locked(id);
  metrics_.invalidated(ids.size());
  update_gauges_locked();
  return ids.size();
}

std::size_t AnswerCache::invalidate_local_all() {
  std::lock_guard lock(mutex_);
  const std::size_t count = slots_.size();
  slots_.clear();
  by_key_.clear();
  by_tag_.clear();
  hot_.clear();
  cold_.clear();
  hot_bytes_ = 0;
  cold_bytes_ = 0;
  indexes_.clear();
  metrics_.invalidated(count);
  update_gauges_locked();
  return count;
}

std::size_t AnswerCache::invalidate(const std::vector<std::string>& tags) {
  std::size_t removed = invalidate_local(tags);
  if (redis_) removed = std::max(removed, redis_->invalidate(tags));
  return removed;
}

std::size_t AnswerCache::invalidate_all() {
  std::size_t removed = invalidate_local_all();
  if (redis_) removed = std::max(removed, redis_->invalidate_all());
  return removed;
}

std::size_t AnswerCache::hot_entries() {
  std::lock_guard lock(mutex_);
  return hot_.size();
}

std::size_t AnswerCache::cold_entries() {
  std::lock_guard lock(mutex_);
  return cold_.size();
}

std::optional<bool> AnswerCache::shared_tier_up() const {
  if (!redis_) return std::nullopt;
  return redis_->up();
}

nlohmann::json AnswerCache::stats() {
  std::lock_guard lock(mutex_);
  std::size_t index_bytes = 0;
  std::size_t tombstones = 0;
  std::size_t indexed = 0;
  for (const auto& [scope, index] : indexes_) {
    index_bytes += index->bytes();
    tombstones += index->tombstones();
    indexed += index->size();
  }
  const double lookups = static_cast<double>(hits_ + misses_);
  nlohmann::json out = {
      {"enabled", config_.enabled},
      {"embedder", embedder_ ? nlohmann::json(embedder_->name()) : nlohmann::json(nullptr)},
      {"entries", slots_.size()},
      {"hot", {{"entries", hot_.size()}, {"bytes", hot_bytes_}, {"max_entries", config_.hot.max_entries},
               {"max_bytes", config_.hot.max_bytes}}},
      {"cold", {{"entries", cold_.size()}, {"bytes", cold_bytes_}, {"max_entries", config_.cold.max_entries},
                {"max_bytes", config_.cold.max_bytes}}},
      {"index", {{"scopes", indexes_.size()}, {"entries", indexed}, {"tombstones", tombstones}, {"bytes", index_bytes}}},
      {"tags", by_tag_.size()},
      {"hits", hits_},
      {"misses", misses_},
      {"hit_rate", lookups > 0 ? static_cast<double>(hits_) / lookups : 0.0},
      {"evictions", evictions_},
  };
  if (redis_) out["redis"] = {{"up", redis_->up()}};
  return out;
}

}  // namespace hengshi::cache
