#include "server/openai_format.h"

#include <chrono>

#include "core/json_text.h"

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

std::string completion_text(std::string_view id, std::string_view model, std::string_view content,
                            std::string_view finish_reason, const TokenUsage& usage) {
  std::string out;
  out.reserve(content.size() + id.size() + model.size() + 240);
  out += R"({"choices":[{"finish_reason":)";
  append_json_string(out, finish_reason);
  out += R"(,"index":0,"logprobs":null,"message":{"content":)";
  append_json_string(out, content);
  out += R"(,"role":"assistant"}}],"created":)";
  out += std::to_string(unix_seconds_now());
  out += R"(,"id":)";
  append_json_string(out, id);
  out += R"(,"model":)";
  append_json_string(out, model);
  out += R"(,"object":"chat.completion","usage":{"completion_tokens":)";
  out += std::to_string(usage.completion_tokens);
  out += R"(,"prompt_tokens":)";
  out += std::to_string(usage.prompt_tokens);
  out += R"(,"total_tokens":)";
  out += std::to_string(usage.prompt_tokens + usage.completion_tokens);
  out += "}}";
  return out;
}

std::string metadata_chunk_text(std::string_view id, std::string_view model) {
  std::string out;
  out.reserve(id.size() + model.size() + 100);
  out += R"({"choices":[],"created":)";
  out += std::to_string(unix_seconds_now());
  out += R"(,"id":)";
  append_json_string(out, id);
  out += R"(,"model":)";
  append_json_string(out, model);
  out += R"(,"object":"chat.completion.chunk"})";
  return out;
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
