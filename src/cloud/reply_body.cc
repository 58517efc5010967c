#include "cloud/reply_body.h"

#include <simdjson.h>

#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace hengshi::cloud {
namespace {

std::int64_t int_or_zero(simdjson::dom::object object, const char* key) {
  std::int64_t value = 0;
  if (object[key].get_int64().get(value) != simdjson::SUCCESS) return 0;
  return value;
}

}  // namespace

Result<ReplyBody> read_reply_body(std::string&& raw) {
  // Deeper than the gateway accepts anywhere (the slow path of with_member() dumps a DOM, which
  // recurses).
  if (json_nesting_exceeds(raw)) return Error{"bad_response", "nested deeper than " + std::to_string(kMaxJsonDepth)};
  // One parser per thread: it keeps its buffers between replies (no allocation per request).
  thread_local simdjson::dom::parser parser;
  const std::size_t size = raw.size();
  raw.reserve(size + simdjson::SIMDJSON_PADDING);  // simdjson reads up to the padding past the end
  simdjson::dom::element root;
  if (auto error = parser.parse(raw.data(), size, /*realloc_if_needed=*/false).get(root)) {
    return Error{"bad_response", simdjson::error_message(error)};
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) return Error{"bad_response", "not a JSON object"};
  simdjson::dom::array choices;
  if (object["choices"].get_array().get(choices) != simdjson::SUCCESS) {
    return Error{"bad_response", "no \"choices\" array"};
  }
  ReplyBody body;
  simdjson::dom::object usage;
  if (object["usage"].get_object().get(usage) == simdjson::SUCCESS) {
    body.usage.prompt_tokens = int_or_zero(usage, "prompt_tokens");
    body.usage.completion_tokens = int_or_zero(usage, "completion_tokens");
  }
  simdjson::dom::element ignored;
  body.has_hengshi = object["hengshi"].get(ignored) == simdjson::SUCCESS;
  simdjson::dom::object first;
  if (choices.size() >= 1 && choices.at(0).get_object().get(first) == simdjson::SUCCESS) {
    std::string_view finish;
    if (first["finish_reason"].get_string().get(finish) == simdjson::SUCCESS) body.finish_reason = finish;
    simdjson::dom::object message;
    if (first["message"].get_object().get(message) == simdjson::SUCCESS) {
      std::string_view content;
      const bool text = message["content"].get_string().get(content) == simdjson::SUCCESS;
      if (text) body.content = content;
      const bool calls = message["tool_calls"].get(ignored) == simdjson::SUCCESS ||
                         message["function_call"].get(ignored) == simdjson::SUCCESS;
      body.plain_text = text && !calls && choices.size() == 1;
    }
  }
  body.raw = std::move(raw);
  return body;
}

std::string with_member(const ReplyBody& body, std::string_view name, std::string_view value_json) {
  if (body.has_hengshi && name == "hengshi") {
    nlohmann::json object = nlohmann::json::parse(body.raw, nullptr, /*allow_exceptions=*/false);
    object[std::string(name)] = nlohmann::json::parse(value_json, nullptr, /*allow_exceptions=*/false);
    return dump_text(object);
  }
  return with_last_member(body.raw, name, value_json);
}

}  // namespace hengshi::cloud
