// OpenAI wire shapes for answers the gateway writes itself (edge answers, canned replies):
// a chat.completion object and chat.completion.chunk events, as the OpenAI SDKs parse them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace hengshi::server {

struct TokenUsage {
  std::int64_t prompt_tokens = 0;
  std::int64_t completion_tokens = 0;
};

std::int64_t unix_seconds_now();

// A whole chat.completion as JSON text, written without a DOM (it is every edge and cached
// answer's body): the bytes dump_text() gives for the same object, members in its (sorted) order.
std::string completion_text(std::string_view id, std::string_view model, std::string_view content,
                            std::string_view finish_reason, const TokenUsage& usage);

// One chunk; `delta` is e.g. {"role":"assistant"} or {"content":"..."}; finish_reason "" = null.
nlohmann::json completion_chunk(const std::string& id, const std::string& model, nlohmann::json delta,
                                const std::string& finish_reason);

// A stream's last chunk before [DONE], written without a DOM: no choices, the shape OpenAI uses
// for usage; the caller splices the metadata in. dump_text()'s bytes for the same object.
std::string metadata_chunk_text(std::string_view id, std::string_view model);

// The usage-only chunk of stream_options.include_usage (choices: []).
nlohmann::json usage_chunk(const std::string& id, const std::string& model, const TokenUsage& usage);

nlohmann::json usage_object(const TokenUsage& usage);

}  // namespace hengshi::server
