// Cache keys. An answer is reused only for the same question in the same *scope*: everything
// besides the last user turn that changes the answer — the route or pool and the model asked
// for, the task type, the system prompt, the conversation before the last user turn, the
// sampling fields (temperature, top_p, max_tokens, stop, response_format, tools, tool_choice) and
// the client key's cache_scope. Fields that do not change the answer (user, metadata, request
// ids, stream, stream_options) are left out. The exact key is xxh3-64 of the scope and the
// question in canonical form (NFKC, width, case, whitespace and punctuation folded).
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/chat_request.h"

namespace hengshi::cache {

struct ScopeParts {
  std::string_view route;      // where the decision sent it ("cloud-small", "edge", ...)
  std::string_view model;      // the model the caller asked for
  std::string_view task_type;
  std::string_view key_scope;  // the client key's cache_scope ("shared" = one scope for all keys)
};

std::uint64_t scope_hash(const ChatRequest& request, const ScopeParts& parts);
std::uint64_t exact_key(std::uint64_t scope, std::string_view canonical_question);

// Why a request's answer may not be cached or served from the cache, or nullopt when it may:
// n > 1, a set seed, no user turn, or non-text content the key cannot see.
std::optional<std::string> uncacheable(const ChatRequest& request);

// A 64-bit id as 16 lower-case hex digits (entry ids on the wire and in Redis keys).
std::string to_hex(std::uint64_t value);

}  // namespace hengshi::cache
