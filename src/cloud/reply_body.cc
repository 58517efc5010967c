#include "cloud/reply_body.h"

#include <new>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "core/json_members.h"
#include "core/json_text.h"

namespace hengshi::cloud {
namespace {

static_assert(kJsonPadding >= simdjson::SIMDJSON_PADDING, "kJsonPadding must cover simdjson's padding");

template <typename T>
bool last_as(simdjson::dom::object object, std::string_view key, T& out) {
  simdjson::dom::element element;
  return last_member(object, key, element) && element.get(out) == simdjson::SUCCESS;
}

std::int64_t int_or_zero(simdjson::dom::object object, std::string_view key) {
  std::int64_t value = 0;
  return last_as(object, key, value) ? value : 0;
}

// Parses `text` with `parser`, a per-thread one that keeps its buffers between calls (no
// allocation per reply or chunk). simdjson reads up to its padding past the end: text without
// that capacity (a reply body, read to its Content-Length) is copied into a per-thread padded
// buffer, not grown, which was an allocation and a copy per reply. The document holds its own
// copies of the strings, so what it reads does not point into either.
simdjson::error_code parse_padded(simdjson::dom::parser& parser, std::string& text, simdjson::dom::element& root) {
  const std::size_t size = text.size();
  if (text.capacity() >= size + kJsonPadding) {
    return parser.parse(text.data(), size, /*realloc_if_needed=*/false).get(root);
  }
  thread_local std::string padded;
  padded.reserve(size + kJsonPadding);
  padded.assign(text);
  return parser.parse(padded.data(), size, /*realloc_if_needed=*/false).get(root);
}

// A reply's parser refuses what nests deeper than the gateway accepts anywhere: the slow path of
// with_member() dumps a DOM, which recurses. simdjson counts an object's levels one higher than
// an array's, so kMaxJsonDepth + 1 refuses nothing a request may hold (64 levels of either) and
// everything past 65. One pass: no byte scan before the parse. (A parser that must grow keeps
// its depth.)
simdjson::dom::parser& reply_parser() {
  thread_local simdjson::dom::parser parser = [] {
    simdjson::dom::parser made;
    if (made.allocate(4096, kMaxJsonDepth + 1) != simdjson::SUCCESS) throw std::bad_alloc();
    return made;
  }();
  return parser;
}

}  // namespace

std::optional<Error> read_reply_body(std::string&& raw, ReplyBody& body) {
  simdjson::dom::element root;
  if (auto error = parse_padded(reply_parser(), raw, root)) {
    if (error == simdjson::DEPTH_ERROR) {
      return Error{"bad_response", "nested deeper than " + std::to_string(kMaxJsonDepth + 1)};
    }
    return Error{"bad_response", simdjson::error_message(error)};
  }
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) return Error{"bad_response", "not a JSON object"};
  simdjson::dom::array choices;
  if (!last_as(object, "choices", choices)) return Error{"bad_response", "no \"choices\" array"};
  simdjson::dom::object usage;
  if (last_as(object, "usage", usage)) {
    body.usage.prompt_tokens = int_or_zero(usage, "prompt_tokens");
    body.usage.completion_tokens = int_or_zero(usage, "completion_tokens");
  }
  simdjson::dom::element ignored;
  body.has_hengshi = last_member(object, "hengshi", ignored);
  simdjson::dom::object first;
  if (choices.size() >= 1 && choices.at(0).get_object().get(first) == simdjson::SUCCESS) {
    std::string_view finish;
    if (last_as(first, "finish_reason", finish)) body.finish_reason = finish;
    simdjson::dom::object message;
    if (last_as(first, "message", message)) {
      std::string_view content;
      const bool text = last_as(message, "content", content);
      if (text) body.content = content;
      const bool calls = last_member(message, "tool_calls", ignored) || last_member(message, "function_call", ignored);
      body.plain_text = text && !calls && choices.size() == 1;
    }
  }
  body.raw = std::move(raw);
  return std::nullopt;
}

Result<ReplyBody> read_reply_body(std::string&& raw) {
  ReplyBody body;
  if (auto refused = read_reply_body(std::move(raw), body)) return std::move(*refused);
  return body;
}

bool is_valid_json(std::string& text, ChunkUsage* usage) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parse_padded(parser, text, root) != simdjson::SUCCESS) return false;
  if (usage == nullptr) return true;
  *usage = ChunkUsage{};
  simdjson::dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    usage->usage_only = true;  // no "choices" to carry
    return true;
  }
  simdjson::dom::object counts;
  if (last_as(object, "usage", counts)) {
    usage->has_usage = true;
    usage->usage.prompt_tokens = int_or_zero(counts, "prompt_tokens");
    usage->usage.completion_tokens = int_or_zero(counts, "completion_tokens");
  }
  simdjson::dom::element choices;
  simdjson::dom::array list;
  usage->usage_only = !last_member(object, "choices", choices) ||
                      (choices.get(list) == simdjson::SUCCESS && list.size() == 0);
  return true;
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
