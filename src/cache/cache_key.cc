#include "cache/cache_key.h"

#include <xxhash.h>

#include <cstdio>

#include "core/json_text.h"

namespace hengshi::cache {
namespace {

using nlohmann::json;

// Each part is fed with its length first, so ("ab","c") and ("a","bc") never collide.
void feed(XXH3_state_t* state, std::string_view part) {
  const std::uint64_t size = part.size();
  XXH3_64bits_update(state, &size, sizeof(size));
  XXH3_64bits_update(state, part.data(), part.size());
}

// The index of the last user message in the body, or -1.
int last_user_index(const json& messages) {
  if (!messages.is_array()) return -1;
  for (int i = static_cast<int>(messages.size()) - 1; i >= 0; --i) {
    const json& message = messages[static_cast<std::size_t>(i)];
    if (message.is_object() && message.value("role", "") == "user") return i;
  }
  return -1;
}

}  // namespace

std::uint64_t scope_hash(const ChatRequest& request, const ScopeParts& parts) {
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  feed(state, "hengshi-cache-scope-v1");
  feed(state, parts.route);
  feed(state, parts.model);
  feed(state, parts.task_type);
  feed(state, parts.key_scope.empty() ? "shared" : parts.key_scope);
  // Every message but the last user turn, as sent (system prompt and earlier turns included).
  const json& body = request.body();
  const json messages = body.contains("messages") ? body["messages"] : json::array();
  const int last_user = last_user_index(messages);
  if (messages.is_array()) {
    for (std::size_t i = 0; i < messages.size(); ++i) {
      feed(state, static_cast<int>(i) == last_user ? std::string_view("<question>") : dump_text(messages[i]));
    }
  }
  for (const char* field : {"temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "response_format",
                            "tools", "tool_choice", "functions", "function_call", "presence_penalty",
                            "frequency_penalty", "logit_bias"}) {
    auto it = body.find(field);
    feed(state, field);
    feed(state, it == body.end() ? std::string("-") : dump_text(*it));
  }
  const std::uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

std::uint64_t exact_key(std::uint64_t scope, std::string_view canonical_question) {
  return XXH3_64bits_withSeed(canonical_question.data(), canonical_question.size(), scope);
}

std::optional<std::string> uncacheable(const ChatRequest& request) {
  const json& body = request.body();
  if (auto n = body.find("n"); n != body.end() && !(n->is_number_integer() && n->get<std::int64_t>() <= 1)) {
    return "n > 1";
  }
  if (request.seed) return "seed";
  if (request.last_user_text().empty()) return "no_user_text";
  const json messages = body.contains("messages") ? body["messages"] : json::array();
  const int last_user = last_user_index(messages);
  if (last_user >= 0) {
    const json& content = messages[static_cast<std::size_t>(last_user)].value("content", json());
    if (content.is_array()) {
      for (const json& part : content) {
        if (part.is_object() && part.value("type", "") != "text") return "non_text_parts";
      }
    }
  }
  return std::nullopt;
}

std::string to_hex(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace hengshi::cache
