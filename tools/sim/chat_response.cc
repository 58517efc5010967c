#include "sim/chat_response.h"

#include <algorithm>
#include <utility>

#include "sim/completion_text.h"

namespace hengshi::sim {
namespace {

using nlohmann::json;

json sim_object(const ReplyIdentity& identity) {
  return {{"name", identity.sim_name},
          {"model", identity.model},
          {"request_index", identity.request_index}};
}

std::string completion_id(const ReplyIdentity& identity) {
  return "chatcmpl-sim-" + std::to_string(identity.request_index);
}

json usage_object(const Completion& completion) {
  auto completion_tokens = static_cast<std::int64_t>(completion.words.size());
  return {{"prompt_tokens", completion.prompt_tokens},
          {"completion_tokens", completion_tokens},
          {"total_tokens", completion.prompt_tokens + completion_tokens}};
}

std::string join_words(const std::vector<std::string>& words) {
  std::size_t size = 0;
  for (const auto& word : words) size += word.size() + 1;
  std::string content;
  content.reserve(size);
  for (const auto& word : words) {
    if (!content.empty()) content += ' ';
    content += word;
  }
  return content;
}

std::string sse(const json& chunk) { return "data: " + chunk.dump() + "\n\n"; }

}  // namespace

Completion make_completion(std::string_view sim_name, const ChatRequest& request,
                           const RequestPlan& plan) {
  Completion completion;
  std::int64_t tokens = plan.output_tokens;
  completion.finish_reason = "stop";
  if (request.max_tokens && *request.max_tokens < tokens) {
    tokens = *request.max_tokens;
    completion.finish_reason = "length";
  }
  for (const auto& message : request.messages) {
    completion.prompt_tokens += count_words(message.text);
  }
  if (plan.reply) {
    completion.words = {*plan.reply};  // a forced answer is returned verbatim, as one word
    completion.finish_reason = "stop";
    return completion;
  }
  completion.words = completion_words(sim_name, request.model, request.last_user_text(), tokens);
  return completion;
}

std::string completion_body(const ReplyIdentity& identity, const Completion& completion) {
  json body = {
      {"id", completion_id(identity)},
      {"object", "chat.completion"},
      {"created", identity.created_s},
      {"model", identity.model},
      {"choices",
       json::array({{
           {"index", 0},
           {"message", {{"role", "assistant"}, {"content", join_words(completion.words)}}},
           {"logprobs", nullptr},
           {"finish_reason", completion.finish_reason},
       }})},
      {"usage", usage_object(completion)},
      {"sim", sim_object(identity)},
  };
  return body.dump();
}

std::vector<SseEvent> stream_events(const ReplyIdentity& identity, const Completion& completion,
                                    bool include_usage, bool garbage) {
  json chunk = {
      {"id", completion_id(identity)}, {"object", "chat.completion.chunk"},
      {"created", identity.created_s}, {"model", identity.model},
      {"choices", json::array()},      {"sim", sim_object(identity)},
  };
  auto with_choice = [&chunk](json delta, json finish_reason) {
    json out = chunk;
    out["choices"] = json::array({{{"index", 0},
                                   {"delta", std::move(delta)},
                                   {"logprobs", nullptr},
                                   {"finish_reason", std::move(finish_reason)}}});
    return out;
  };

  std::vector<SseEvent> events;
  events.reserve(completion.words.size() + 5);
  events.push_back({sse(with_choice({{"role", "assistant"}, {"content", ""}}, nullptr)), false});
  if (garbage) {
    events.push_back({"data: {\"choices\": [{\"delta\" <<garbage from hengshi-sim\n\n", false});
  }
  for (std::size_t i = 0; i < completion.words.size(); ++i) {
    std::string piece = i == 0 ? completion.words[i] : " " + completion.words[i];
    events.push_back({sse(with_choice({{"content", std::move(piece)}}, nullptr)), i > 0});
  }
  events.push_back({sse(with_choice(json::object(), completion.finish_reason)), false});
  if (include_usage) {
    json usage = chunk;
    usage["usage"] = usage_object(completion);
    events.push_back({sse(usage), false});
  }
  events.push_back({"data: [DONE]\n\n", false});
  return events;
}

std::string_view garbage_body() { return "<html>502 garbage from hengshi-sim {\"not\": json"; }

ApiError injected_server_error(std::string_view sim_name) {
  return {500,
          "server_error",
          "sim_injected_error",
          "simulated upstream error (hengshi-sim " + std::string(sim_name) + ")",
          {}};
}

ApiError injected_rate_limit(std::string_view sim_name, std::int64_t retry_after_s) {
  return {429,
          "rate_limit_error",
          "rate_limit_exceeded",
          "simulated rate limit (hengshi-sim " + std::string(sim_name) + "); retry after " +
              std::to_string(retry_after_s) + " s",
          {}};
}

}  // namespace hengshi::sim
