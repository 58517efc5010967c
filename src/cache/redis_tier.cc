#include "cache/redis_tier.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cstring>
#include <random>

#include "cache/answer_cache.h"
#include "cache/cache_key.h"
#include "core/json_text.h"

namespace hengshi::cache {
namespace {

using nlohmann::json;

// One round trip for a local miss: the id behind an exact key, then that entry's fields.
constexpr const char* kFetchByKey = R"lua(
local id = redis.call('GET', KEYS[1])
if not id then return nil end
return redis.call('HMGET', ARGV[1] .. 'e:' .. id, 'm', 'v')
)lua";

// Removes every entry of the tags (ARGV[2..]) and the tag sets; returns how many entries went.
// An exact key is dropped only while it still points at the entry being removed.
constexpr const char* kInvalidate = R"lua(
local prefix = ARGV[1]
local removed = 0
for i = 2, #ARGV do
  local tag_key = prefix .. 't:' .. ARGV[i]
  for _, id in ipairs(redis.call('SMEMBERS', tag_key)) do
    local entry_key = prefix .. 'e:' .. id
    local key = redis.call('HGET', entry_key, 'k')
    if key and redis.call('GET', prefix .. 'k:' .. key) == id then redis.call('DEL', prefix .. 'k:' .. key) end
    removed = removed + redis.call('DEL', entry_key)
  end
  redis.call('DEL', tag_key)
end
return removed
)lua";

std::uint64_t from_hex(const std::string& text) {
  try {
    return std::stoull(text, nullptr, 16);
  } catch (const std::exception&) {
    return 0;
  }
}

std::string vector_bytes(const std::vector<float>& vector) {
  return std::string(reinterpret_cast<const char*>(vector.data()), vector.size() * sizeof(float));
}

}  // namespace

RedisTier::RedisTier(CacheRedisConfig config) : config_(std::move(config)) {
  instance_ = to_hex(std::random_device{}() * 0x9E3779B97F4A7C15ULL ^ static_cast<std::uint64_t>(::getpid()));
}

RedisTier::~RedisTier() { stop(); }

void RedisTier::attach(AnswerCache& cache, CacheMetrics& metrics) {
  cache_ = &cache;
  client_ = std::make_unique<RedisClient>(config_, &metrics);
}

void RedisTier::start() {
  if (subscriber_.joinable() || !client_) return;
  stopping_ = false;
  subscriber_ = std::thread([this] { subscriber_loop(); });
}

void RedisTier::stop() {
  stopping_ = true;
  {
    std::lock_guard lock(subscriber_mutex_);
    if (subscriber_fd_ >= 0) ::shutdown(subscriber_fd_, SHUT_RDWR);  // ends the blocking read
  }
  if (subscriber_.joinable()) subscriber_.join();
}

std::string RedisTier::to_json_text(const CacheEntry& entry) {
  json out = {{"id", to_hex(entry.id)},
              {"scope", to_hex(entry.scope)},
              {"key", to_hex(entry.key)},
              {"task_type", entry.task_type},
              {"question", entry.question},
              {"embedder", entry.embedder},
              {"answer",
               {{"content", entry.answer.content},
                {"model", entry.answer.model},
                {"finish_reason", entry.answer.finish_reason},
                {"prompt_tokens", entry.answer.prompt_tokens},
                {"completion_tokens", entry.answer.completion_tokens},
                {"source", entry.answer.source},
                {"model_version", entry.answer.model_version}}},
              {"tags", entry.tags},
              {"created_ms", entry.created_ms},
              {"expires_ms", entry.expires_ms}};
  return dump_text(out);
}

std::optional<std::shared_ptr<CacheEntry>> RedisTier::from_stored(const std::string& json_text,
                                                                  const std::string& vector) {
  const json in = json::parse(json_text, nullptr, false);
  if (!in.is_object()) return std::nullopt;
  try {
    auto entry = std::make_shared<CacheEntry>();
    entry->id = from_hex(in.at("id").get<std::string>());
    entry->scope = from_hex(in.at("scope").get<std::string>());
    entry->key = from_hex(in.at("key").get<std::string>());
    entry->task_type = in.at("task_type").get<std::string>();
    entry->question = in.at("question").get<std::string>();
    entry->features = guard_features(entry->question);
    entry->embedder = in.at("embedder").get<std::string>();
    const json& answer = in.at("answer");
    entry->answer.content = answer.at("content").get<std::string>();
    entry->answer.model = answer.at("model").get<std::string>();
    entry->answer.finish_reason = answer.at("finish_reason").get<std::string>();
    entry->answer.prompt_tokens = answer.at("prompt_tokens").get<std::int64_t>();
    entry->answer.completion_tokens = answer.at("completion_tokens").get<std::int64_t>();
    entry->answer.source = answer.at("source").get<std::string>();
    entry->answer.model_version = answer.at("model_version").get<std::string>();
    entry->tags = in.at("tags").get<std::vector<std::string>>();
    entry->created_ms = in.at("created_ms").get<std::int64_t>();
    entry->expires_ms = in.at("expires_ms").get<std::int64_t>();
    if (vector.size() % sizeof(float) == 0 && !entry->embedder.empty()) {
      entry->vector.resize(vector.size() / sizeof(float));
      std::memcpy(entry->vector.data(), vector.data(), vector.size());
    }
    if (entry->id == 0) return std::nullopt;
    return entry;
  } catch (const std::exception&) {
    return std::nullopt;  // written by something else: ignored
  }
}

awaitable<std::optional<std::shared_ptr<CacheEntry>>> RedisTier::fetch_by_key(std::uint64_t key) {
  // Built before the co_await: g++ 12 mishandles braced temporaries and literals inside one.
  std::vector<std::string> argv = {"EVAL", kFetchByKey, "1", config_.prefix + "k:" + to_hex(key), config_.prefix};
  std::string op = "fetch";
  auto reply = co_await client_->async_call(std::move(argv), std::move(op));
  if (!reply || reply->type != RedisReply::Type::array || reply->elements.size() != 2) co_return std::nullopt;
  const auto& fields = reply->elements;
  if (fields[0].type != RedisReply::Type::string) co_return std::nullopt;
  co_return from_stored(fields[0].text, fields[1].text);
}

std::optional<std::shared_ptr<CacheEntry>> RedisTier::fetch_by_id(const std::string& id_hex) {
  auto reply = client_->call({"HMGET", config_.prefix + "e:" + id_hex, "m", "v"}, "fetch");
  if (!reply || reply->type != RedisReply::Type::array || reply->elements.size() != 2 ||
      reply->elements[0].type != RedisReply::Type::string) {
    return std::nullopt;
  }
  return from_stored(reply->elements[0].text, reply->elements[1].text);
}

void RedisTier::store(const std::shared_ptr<const CacheEntry>& entry, std::int64_t stale_s) {
  // Everything is serialised here, before the caller hands the vector to the index.
  const std::string id = to_hex(entry->id);
  const std::string key = to_hex(entry->key);
  const std::int64_t keep_ms = std::max<std::int64_t>(1000, entry->expires_ms - entry->created_ms + stale_s * 1000);
  const std::string keep = std::to_string(keep_ms);
  std::vector<std::vector<std::string>> commands = {
      {"HSET", config_.prefix + "e:" + id, "m", to_json_text(*entry), "v", vector_bytes(entry->vector), "k", key},
      {"PEXPIRE", config_.prefix + "e:" + id, keep},
      {"SET", config_.prefix + "k:" + key, id, "PX", keep},
  };
  for (const auto& tag : entry->tags) {
    const std::string tag_key = config_.prefix + "t:" + tag;
    commands.push_back({"SADD", tag_key, id});
    // A tag set lives as long as its longest-lived entry: set when new, only ever lengthened.
    commands.push_back({"PEXPIRE", tag_key, keep, "NX"});
    commands.push_back({"PEXPIRE", tag_key, keep, "GT"});
  }
  commands.push_back({"PUBLISH", config_.prefix + "events", instance_ + " fill " + id});
  client_->post_pipeline(std::move(commands), "store");
}

std::size_t RedisTier::invalidate(const std::vector<std::string>& tags) {
  std::vector<std::string> argv = {"EVAL", kInvalidate, "0", config_.prefix};
  argv.insert(argv.end(), tags.begin(), tags.end());
  auto removed = client_->pipeline(
      {argv, {"PUBLISH", config_.prefix + "events", instance_ + " invalidate " + dump_text(json(tags))}}, "invalidate");
  if (!removed || removed->front().type != RedisReply::Type::integer) return 0;
  return static_cast<std::size_t>(removed->front().integer);
}

std::size_t RedisTier::invalidate_all() {
  std::size_t removed = 0;
  std::string cursor = "0";
  do {
    auto page = client_->call({"SCAN", cursor, "MATCH", config_.prefix + "*", "COUNT", "1000"}, "clear");
    if (!page || page->type != RedisReply::Type::array || page->elements.size() != 2) break;
    cursor = page->elements[0].text;
    std::vector<std::string> unlink = {"UNLINK"};
    for (const auto& key : page->elements[1].elements) {
      if (key.text.rfind(config_.prefix + "e:", 0) == 0) ++removed;
      unlink.push_back(key.text);
    }
    if (unlink.size() > 1) (void)client_->call(unlink, "clear");
  } while (cursor != "0" && !stopping_);
  (void)client_->call({"PUBLISH", config_.prefix + "events", instance_ + " clear"}, "clear");
  return removed;
}

void RedisTier::on_event(const std::string& message) {
  // "<instance> <kind> <argument>"
  const auto first = message.find(' ');
  if (first == std::string::npos) return;
  if (message.compare(0, first, instance_) == 0) return;  // our own
  const auto second = message.find(' ', first + 1);
  const std::string kind = message.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
  const std::string argument = second == std::string::npos ? "" : message.substr(second + 1);
  if (kind == "fill") {
    if (auto entry = fetch_by_id(argument)) cache_->insert_local(*entry);
  } else if (kind == "invalidate") {
    const json tags = json::parse(argument, nullptr, false);
    if (tags.is_array()) {
      std::vector<std::string> names;
      for (const auto& tag : tags) {
        if (tag.is_string()) names.push_back(tag.get<std::string>());
      }
      cache_->invalidate_local(names);
    }
  } else if (kind == "clear") {
    cache_->invalidate_local_all();
  }
}

void RedisTier::load_all() {
  const std::size_t limit =
      static_cast<std::size_t>(cache_->config().hot.max_entries + cache_->config().cold.max_entries);
  std::size_t loaded = 0;
  std::string cursor = "0";
  do {
    auto page = client_->call({"SCAN", cursor, "MATCH", config_.prefix + "e:*", "COUNT", "500"}, "load");
    if (!page || page->type != RedisReply::Type::array || page->elements.size() != 2) return;
    cursor = page->elements[0].text;
    std::vector<std::vector<std::string>> commands;
    for (const auto& key : page->elements[1].elements) commands.push_back({"HMGET", key.text, "m", "v"});
    if (commands.empty()) continue;
    auto replies = client_->pipeline(commands, "load");
    if (!replies) return;
    for (const auto& reply : *replies) {
      if (reply.type != RedisReply::Type::array || reply.elements.size() != 2 ||
          reply.elements[0].type != RedisReply::Type::string) {
        continue;
      }
      if (auto entry = from_stored(reply.elements[0].text, reply.elements[1].text)) {
        cache_->insert_local(std::move(*entry));
        ++loaded;
      }
    }
  } while (cursor != "0" && loaded < limit && !stopping_);
  spdlog::info("cache: loaded {} entries from Redis {}:{}", loaded, config_.host, config_.port);
}

void RedisTier::subscriber_loop() {
  bool loaded = false;
  while (!stopping_) {
    // Blocking reads (no timeout): stop() shuts the socket down to end one. TCP keepalive finds
    // a peer that vanished; a closed connection is reconnected after retry_ms.
    redisContext* context = client_->connect_for_subscribe(std::chrono::milliseconds(0));
    if (context != nullptr) {
      redisEnableKeepAlive(context);
      const std::string channel = config_.prefix + "events";
      auto* subscribed =
          static_cast<redisReply*>(redisCommand(context, "SUBSCRIBE %b", channel.data(), channel.size()));
      if (subscribed != nullptr) {
        freeReplyObject(subscribed);
        {
          std::lock_guard lock(subscriber_mutex_);
          subscriber_fd_ = context->fd;
        }
        if (!loaded) {
          load_all();  // after subscribing, so nothing filled meanwhile is missed
          loaded = true;
        }
        while (!stopping_) {
          void* raw = nullptr;
          if (redisGetReply(context, &raw) != REDIS_OK || raw == nullptr) break;  // dropped or stopped
          auto* reply = static_cast<redisReply*>(raw);
          if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 3 &&
              reply->element[2]->type == REDIS_REPLY_STRING) {
            on_event(std::string(reply->element[2]->str, reply->element[2]->len));
          }
          freeReplyObject(reply);
        }
        std::lock_guard lock(subscriber_mutex_);
        subscriber_fd_ = -1;
      }
      redisFree(context);
    }
    for (std::int64_t waited = 0; waited < config_.retry_ms && !stopping_; waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

}  // namespace hengshi::cache
