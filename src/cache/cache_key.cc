#include "cache/cache_key.h"

#include <xxhash.h>

#include <cstdio>
#include <optional>
#include <string>

#include <simdjson.h>

#include "core/json_members.h"
#include "core/json_text.h"

namespace hengshi::cache {
namespace {

// Each part is fed with its length first, so ("ab","c") and ("a","bc") never collide.
void feed(XXH3_state_t* state, std::string_view part) {
  const std::uint64_t size = part.size();
  XXH3_64bits_update(state, &size, sizeof(size));
  XXH3_64bits_update(state, part.data(), part.size());
}

using simdjson::dom::element;
using Type = simdjson::dom::element_type;

// The body is read from the request's parse as its DOM reads (core/json_members.h), and parts
// of it are fed as the DOM's dump: keys stay what they were when they were computed from the DOM.
struct Body {
  std::optional<element> root;  // the body object; none for a request without one

  std::optional<element> member(std::string_view name) const {
    element found;
    if (root && last_member(root->get_object().value_unsafe(), name, found)) return found;
    return std::nullopt;
  }
};

Body body_of(const ChatRequest& request) {
  Body body;
  if (element root; request.body_root(root) && root.type() == Type::OBJECT) body.root = root;
  return body;
}

bool is_user_message(element message) {
  element role;
  return message.type() == Type::OBJECT && last_member(message.get_object().value_unsafe(), "role", role) &&
         role.type() == Type::STRING && role.get_string().value_unsafe() == "user";
}

// The body's messages array, with the index of its last user message (-1: none).
struct Messages {
  std::optional<simdjson::dom::array> items;
  int last_user = -1;
};

Messages messages_of(const Body& body) {
  Messages messages;
  const std::optional<element> field = body.member("messages");
  if (!field || field->type() != Type::ARRAY) return messages;
  messages.items = field->get_array().value_unsafe();
  int i = 0;
  for (element message : *messages.items) {
    if (is_user_message(message)) messages.last_user = i;
    ++i;
  }
  return messages;
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
  const Body body = body_of(request);
  const Messages messages = messages_of(body);
  std::string text;
  if (messages.items) {
    int i = 0;
    for (element message : *messages.items) {
      text.clear();
      if (i++ == messages.last_user) {
        feed(state, "<question>");
      } else {
        append_dom_text(text, message);
        feed(state, text);
      }
    }
  }
  for (const char* field : {"temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "response_format",
                            "tools", "tool_choice", "functions", "function_call", "presence_penalty",
                            "frequency_penalty", "logit_bias"}) {
    feed(state, field);
    if (const std::optional<element> value = body.member(field)) {
      text.clear();
      append_dom_text(text, *value);
      feed(state, text);
    } else {
      feed(state, "-");
    }
  }
  const std::uint64_t hash = XXH3_64bits_digest(state);
  XXH3_freeState(state);
  return hash;
}

std::uint64_t exact_key(std::uint64_t scope, std::string_view canonical_question) {
  return XXH3_64bits_withSeed(canonical_question.data(), canonical_question.size(), scope);
}

std::optional<std::string> uncacheable(const ChatRequest& request) {
  const Body body = body_of(request);
  if (const std::optional<element> n = body.member("n");
      n && !((n->type() == Type::INT64 && n->get_int64().value_unsafe() <= 1) ||
             (n->type() == Type::UINT64 && static_cast<std::int64_t>(n->get_uint64().value_unsafe()) <= 1))) {
    return "n > 1";
  }
  if (request.seed) return "seed";
  if (request.last_user_text().empty()) return "no_user_text";
  const Messages messages = messages_of(body);
  if (messages.last_user >= 0) {
    const element message = messages.items->at(static_cast<std::size_t>(messages.last_user)).value_unsafe();
    element content;
    if (last_member(message.get_object().value_unsafe(), "content", content) && content.type() == Type::ARRAY) {
      const simdjson::dom::array parts = content.get_array().value_unsafe();
      for (element part : parts) {
        element type;
        if (part.type() != Type::OBJECT) continue;
        // A part without a string "type" reads as "" (not "text"), as the DOM's value() gave.
        const bool text_part = last_member(part.get_object().value_unsafe(), "type", type) &&
                               type.type() == Type::STRING && type.get_string().value_unsafe() == "text";
        if (!text_part) return "non_text_parts";
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
