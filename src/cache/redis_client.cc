#include "cache/redis_client.h"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "cache/cache_metrics.h"

namespace hengshi::cache {
namespace {

std::int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

timeval to_timeval(std::int64_t ms) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  return tv;
}

RedisReply convert(const redisReply* reply) {
  RedisReply out;
  if (reply == nullptr) return out;
  switch (reply->type) {
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::integer;
      out.integer = reply->integer;
      break;
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::string;
      out.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::status;
      out.text.assign(reply->str, reply->len);
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::array;
      for (std::size_t i = 0; i < reply->elements; ++i) out.elements.push_back(convert(reply->element[i]));
      break;
    default:
      break;
  }
  return out;
}

// Sends every command of `commands` and reads their replies (one round trip).
Result<std::vector<RedisReply>> run(redisContext* context, const std::vector<std::vector<std::string>>& commands) {
  for (const auto& argv : commands) {
    std::vector<const char*> args;
    std::vector<std::size_t> lengths;
    for (const auto& arg : argv) {
      args.push_back(arg.data());
      lengths.push_back(arg.size());
    }
    if (redisAppendCommandArgv(context, static_cast<int>(args.size()), args.data(), lengths.data()) != REDIS_OK) {
      return Error{"redis_error", context->errstr[0] ? context->errstr : "append failed"};
    }
  }
  std::vector<RedisReply> replies;
  std::string error;
  for (std::size_t i = 0; i < commands.size(); ++i) {
    void* raw = nullptr;
    if (redisGetReply(context, &raw) != REDIS_OK || raw == nullptr) {
      return Error{"redis_error", context->errstr[0] ? context->errstr : "no reply"};
    }
    auto* reply = static_cast<redisReply*>(raw);
    if (reply->type == REDIS_REPLY_ERROR && error.empty()) error.assign(reply->str, reply->len);
    replies.push_back(convert(reply));
    freeReplyObject(reply);
  }
  if (!error.empty()) return Error{"redis_reply_error", error};
  return replies;
}

}  // namespace

RedisClient::RedisClient(CacheRedisConfig config, CacheMetrics* metrics) : config_(std::move(config)), metrics_(metrics) {
  if (!config_.password_env.empty()) {
    const char* password = std::getenv(config_.password_env.c_str());
    if (password != nullptr) password_ = password;
  }
  if (metrics_) metrics_->redis_up(false);
}

RedisClient::~RedisClient() {
  pool_.join();
  std::lock_guard lock(mutex_);
  for (redisContext* context : idle_) redisFree(context);
  idle_.clear();
}

bool RedisClient::up() const { return up_.load(); }

redisContext* RedisClient::connect_for_subscribe(std::chrono::milliseconds read_timeout) {
  redisContext* context = redisConnectWithTimeout(config_.host.c_str(), config_.port, to_timeval(config_.timeout_ms));
  if (context == nullptr || context->err) {
    if (context) redisFree(context);
    return nullptr;
  }
  redisSetTimeout(context, to_timeval(read_timeout.count()));  // 0 = block
  if (!password_.empty()) {
    auto* reply = static_cast<redisReply*>(redisCommand(context, "AUTH %s", password_.c_str()));
    const bool ok = reply != nullptr && reply->type != REDIS_REPLY_ERROR;
    if (reply) freeReplyObject(reply);
    if (!ok) {
      redisFree(context);
      return nullptr;
    }
  }
  return context;
}

redisContext* RedisClient::take() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      redisContext* context = idle_.back();
      idle_.pop_back();
      return context;
    }
  }
  redisContext* context = connect_for_subscribe(std::chrono::milliseconds(config_.timeout_ms));
  return context;
}

void RedisClient::give_back(redisContext* context, bool healthy) {
  if (!healthy || context->err) {
    redisFree(context);
    return;
  }
  std::lock_guard lock(mutex_);
  if (idle_.size() < 8) {
    idle_.push_back(context);
  } else {
    redisFree(context);
  }
}

void RedisClient::mark_down(std::string_view op, const std::string& why) {
  if (metrics_) {
    metrics_->redis_error(op);
    metrics_->redis_up(false);
  }
  down_until_ms_.store(steady_ms() + config_.retry_ms);
  up_.store(false);
  if (!logged_down_.exchange(true)) {
    spdlog::warn("cache: Redis {}:{} is down ({}: {}); serving from the local tier, key limits local, retrying every "
                 "{} ms",
                 config_.host, config_.port, op, why, config_.retry_ms);
  }
}

void RedisClient::mark_up() {
  if (!up_.exchange(true)) {
    if (metrics_) metrics_->redis_up(true);
    if (logged_down_.exchange(false)) spdlog::info("cache: Redis {}:{} answers again", config_.host, config_.port);
  }
}

Result<std::vector<RedisReply>> RedisClient::pipeline(const std::vector<std::vector<std::string>>& commands,
                                                      std::string_view op) {
  if (steady_ms() < down_until_ms_.load()) return Error{"redis_down", "Redis is down; retrying later"};
  redisContext* context = take();
  if (context == nullptr) {
    mark_down(op, "cannot connect");
    return Error{"redis_error", "cannot connect to Redis " + config_.host + ":" + std::to_string(config_.port)};
  }
  auto replies = run(context, commands);
  // An error reply (a script error, a wrong type) says nothing about Redis's health.
  const bool broken = !replies && replies.error().code == "redis_error";
  give_back(context, !broken);
  if (broken) {
    mark_down(op, replies.error().message);
    return replies;
  }
  mark_up();
  if (!replies && metrics_) metrics_->redis_error(op);
  return replies;
}

Result<RedisReply> RedisClient::call(const std::vector<std::string>& argv, std::string_view op) {
  auto replies = pipeline({argv}, op);
  if (!replies) return replies.error();
  return std::move(replies.value().front());
}

awaitable<Result<RedisReply>> RedisClient::async_call(std::vector<std::string> argv, std::string op) {
  // The blocking call runs on the pool; its result is handed back on the awaiting coroutine's
  // executor, which is kept alive (outstanding work) until then.
  auto initiation = [this, argv = std::move(argv), op = std::move(op)](auto handler) mutable {
    auto executor = asio::prefer(asio::get_associated_executor(handler),
                                 asio::execution::outstanding_work.tracked);
    asio::post(pool_, [this, handler = std::move(handler), executor, argv = std::move(argv),
                       op = std::move(op)]() mutable {
      auto result = std::make_shared<Result<RedisReply>>(call(argv, op));
      asio::post(executor, [handler = std::move(handler), result]() mutable { handler(std::move(*result)); });
    });
  };
  co_return co_await asio::async_initiate<decltype(use_awaitable), void(Result<RedisReply>)>(std::move(initiation),
                                                                                             use_awaitable);
}

void RedisClient::post_pipeline(std::vector<std::vector<std::string>> commands, std::string op) {
  asio::post(pool_, [this, commands = std::move(commands), op = std::move(op)] { (void)pipeline(commands, op); });
}

}  // namespace hengshi::cache
