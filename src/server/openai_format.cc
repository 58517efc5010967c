#include "server/openai_format.h"

#include <chrono>

namespace hengshi::server {

using nlohmann::json;

std::int64_t unix_seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json usage_object(const TokenUsage& usage) {
  return {{"prompt_tokens", usage.prompt_tokens},
          {"completion_tokens", usage.completion_tokens},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens}};
}

json completion_object(const std::string& id, const std::string& model, const std::string& content,
                       const std::string& finish_reason, const TokenUsage& usage) {
  json message = {{"role", "assistant"}, {"content", content}};
  json choice = {{"index", 0}, {"message", std::move(message)}, {"logprobs", nullptr},
                 {"finish_reason", finish_reason}};
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", unix_seconds_now()},
          {"model", model},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_object(usage)}};
}

json completion_chunk(const std::string& id, const std::string& model, json delta,
                      const std::string& finish_reason) {
  json choice = {{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr},
                 {"finish_reason", finish_reason.empty() ? json(nullptr) : json(finish_reason)}};
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", unix_seconds_now()},
          {"model", model},
          {"choices", json::array({std::move(choice)})}};
}

json usage_chunk(const std::string& id, const std::string& model, const TokenUsage& usage) {
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", unix_seconds_now()},
          {"model", model},
          {"choices", json::array()},
          {"usage", usage_object(usage)}};
}

}  // namespace hengshi::server
