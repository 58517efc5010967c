#include "core/chat_request.h"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <utility>

#include <simdjson.h>

#include "core/document_pool.h"
#include "core/json_fast_parse.h"
#include "core/json_members.h"
#include "core/json_raw_members.h"
#include "core/json_text.h"

namespace hengshi {

// Keys as string_views: a lookup by `const char*` runs strlen at every comparison.
using namespace std::string_view_literals;
namespace {

using nlohmann::json;
using simdjson::dom::element;
using Type = simdjson::dom::element_type;

// The body is read from simdjson's tape, as nlohmann's DOM of it would read (core/json_members.h):
// the types a check asks about are nlohmann's, a repeated name's last value counts, and where
// every member is checked in turn (the "hengshi" object) they come in the order of their names.
bool is_string(element value) { return value.type() == Type::STRING; }
bool is_null(element value) { return value.type() == Type::NULL_VALUE; }
bool is_object(element value) { return value.type() == Type::OBJECT; }
bool is_array(element value) { return value.type() == Type::ARRAY; }
bool is_boolean(element value) { return value.type() == Type::BOOL; }
bool is_integer(element value) { return value.type() == Type::INT64 || value.type() == Type::UINT64; }
bool is_number(element value) { return is_integer(value) || value.type() == Type::DOUBLE; }
std::string_view string_of(element value) { return value.get_string().value_unsafe(); }
bool bool_of(element value) { return value.get_bool().value_unsafe(); }
double double_of(element value) { return value.get_double().value_unsafe(); }
// An integer as nlohmann's get<std::int64_t>() gives it: one above INT64_MAX wraps negative.
std::int64_t int64_of(element value) {
  if (value.type() == Type::UINT64) return static_cast<std::int64_t>(value.get_uint64().value_unsafe());
  return value.get_int64().value_unsafe();
}
// A member of an object value, the last of a repeated name.
bool member(element object, std::string_view key, element& out) {
  return last_member(object.get_object().value_unsafe(), key, out);
}

constexpr std::array kKnownRoles = {"system"sv, "user"sv, "assistant"sv, "tool"sv, "developer"sv, "function"sv};

bool known_role(std::string_view role) {
  for (std::string_view known : kKnownRoles) {
    if (role == known) return true;
  }
  return false;
}

ApiError bad(std::string code, std::string message, std::string param) {
  return ApiError::invalid_request(std::move(code), std::move(message), std::move(param));
}

// Flattens string content or an array of {"type":"text","text":...} parts; other part types
// (images, audio) are kept in the forwarded body but contribute no routing text.
// `param()` names the content for an error; it is called only then (most requests have none).
// `content` is null for a message without one.
template <typename Param>
Result<std::string, ApiError> content_text(const element* content, const Param& param) {
  if (content == nullptr || is_null(*content)) return std::string();
  if (is_string(*content)) return std::string(string_of(*content));
  if (!is_array(*content)) {
    return bad("invalid_type", param() + " must be a string or an array of content parts", param());
  }
  std::string text;
  std::size_t i = 0;
  // Named, not a temporary in the range-for: g++ 12 warns of a dangling tape pointer otherwise.
  const simdjson::dom::array parts = content->get_array().value_unsafe();
  for (element part : parts) {
    const auto part_param = [&] { return param() + "[" + std::to_string(i) + "]"; };
    element type;
    if (!is_object(part) || !member(part, "type"sv, type) || !is_string(type)) {
      return bad("invalid_type", part_param() + " must be an object with a string \"type\"", part_param());
    }
    if (string_of(type) == "text"sv) {
      element part_text;
      if (!member(part, "text"sv, part_text) || !is_string(part_text)) {
        return bad("invalid_type", part_param() + ".text must be a string", part_param() + ".text");
      }
      if (!text.empty()) text += '\n';
      text += string_of(part_text);
    }
    ++i;
  }
  return text;
}

Result<HengshiExtension, ApiError> parse_extension(element ext) {
  HengshiExtension out;
  if (!is_object(ext)) return bad("invalid_type", "hengshi must be an object", "hengshi");
  const JsonMembers members = sorted_members(ext.get_object().value_unsafe());
  for (const auto& [key, value] : members) {
    std::string param = "hengshi." + std::string(key);
    if (key == "task_type"sv || key == "session_id"sv || key == "pii_policy"sv) {
      if (!is_string(value)) return bad("invalid_type", param + " must be a string", param);
      std::string text(string_of(value));
      const std::size_t limit = key == "session_id"sv ? kMaxSessionIdBytes : kMaxTaskTypeBytes;
      if (text.size() > limit) {
        return bad("invalid_value", param + " must be at most " + std::to_string(limit) + " bytes", param);
      }
      if (key == "task_type"sv) out.task_type = std::move(text);
      else if (key == "session_id"sv) out.session_id = std::move(text);
      else out.pii_policy = std::move(text);
    } else if (key == "deadline_ms"sv) {
      if (!is_integer(value) || int64_of(value) <= 0) {
        return bad("invalid_value", param + " must be a positive integer (milliseconds)", param);
      }
      auto deadline = check_deadline_ms(int64_of(value), param);
      if (!deadline) return deadline.error();
      out.deadline_ms = *deadline;
    } else if (key == "cache"sv) {
      if (!is_boolean(value)) return bad("invalid_type", param + " must be a boolean", param);
      out.cache = bool_of(value);
    } else if (key == "commit"sv) {
      const auto mode = is_string(value) ? commit_mode_from_string(std::string(string_of(value))) : std::nullopt;
      if (!mode) return bad("invalid_value", param + " must be \"adaptive\", \"always\" or \"never\"", param);
      out.commit = *mode;
    } else if (key == "tags"sv) {
      if (!is_array(value)) return bad("invalid_type", param + " must be an array of strings", param);
      const simdjson::dom::array tags = value.get_array().value_unsafe();
      if (tags.size() > 32) return bad("invalid_value", param + " holds at most 32 tags", param);
      for (element tag : tags) {
        if (!is_string(tag)) return bad("invalid_type", param + " must be an array of strings", param);
        if (string_of(tag).size() > kMaxTaskTypeBytes) {
          return bad("invalid_value", param + " entries must be at most " + std::to_string(kMaxTaskTypeBytes) + " bytes", param);
        }
        out.tags.emplace_back(string_of(tag));
      }
    } else {
      return bad("unknown_parameter", "unknown field " + param, param);
    }
  }
  return out;
}

}  // namespace

std::string ChatRequest::last_user_text() const {
  for (auto it = messages.rbegin(); it != messages.rend(); ++it) {
    if (it->role == "user") return it->text;
  }
  return {};
}

bool ChatRequest::body_root(element& root) const {
  if (parsed_body == nullptr) return false;
  root = parsed_body->root();
  return true;
}

const json& ChatRequest::body() const {
  if (body_dom == nullptr) {
    element root;
    json dom = body_root(root) ? to_nlohmann(root) : json();
    if (dom.is_object()) dom.erase("hengshi");
    body_dom = std::make_shared<const json>(std::move(dom));
  }
  return *body_dom;
}

bool ChatRequest::sent_stream_options() const {
  element root;
  element options;
  return body_root(root) && is_object(root) && member(root, "stream_options"sv, options) && is_object(options);
}

void ChatRequest::set_body(json body) {
  auto document = std::make_shared<simdjson::dom::document>();
  // A DOM built in the gateway nests no deeper than what it came from; a test's may: unread then.
  parsed_body = parse_json_document(dump_text(body), std::numeric_limits<int>::max() - 1, *document)
                    ? std::shared_ptr<const simdjson::dom::document>(std::move(document))
                    : nullptr;
  body_dom = std::make_shared<const json>(std::move(body));
  forwarded_members.reset();
}

Result<std::int64_t, ApiError> check_deadline_ms(std::int64_t value, const std::string& param) {
  if (value <= 0 || value > kMaxDeadlineMs) {
    return bad("invalid_value",
               param + " must be between 1 and " + std::to_string(kMaxDeadlineMs) + " (milliseconds)", param);
  }
  return value;
}

namespace {

// A number field within [low, high], or absent (nullptr) / null.
Result<std::optional<double>, ApiError> bounded_number(const element* field, std::string_view key, double low,
                                                       double high) {
  if (field == nullptr || is_null(*field)) return std::optional<double>();
  if (!is_number(*field)) return bad("invalid_type", std::string(key) + " must be a number", std::string(key));
  const double value = double_of(*field);
  if (!(value >= low && value <= high)) {
    return bad("invalid_value",
               std::string(key) + " must be between " + dump_text(low) + " and " + dump_text(high), std::string(key));
  }
  return std::optional<double>(value);
}

// The top-level members parse_chat_request reads, found in one walk over the body's members
// (the last of a repeated name wins, as in a DOM).
struct TopFields {
  std::optional<element> model;
  std::optional<element> messages;
  std::optional<element> stream;
  std::optional<element> stream_options;
  std::optional<element> max_tokens;
  std::optional<element> max_completion_tokens;
  std::optional<element> temperature;
  std::optional<element> top_p;
  std::optional<element> seed;
  std::optional<element> response_format;
  std::optional<element> stop;
  std::optional<element> hengshi;
};

TopFields top_fields(simdjson::dom::object members) {
  static constexpr std::pair<std::string_view, std::optional<element> TopFields::*> kNamed[] = {
      {"model"sv, &TopFields::model},
      {"messages"sv, &TopFields::messages},
      {"stream"sv, &TopFields::stream},
      {"stream_options"sv, &TopFields::stream_options},
      {"max_tokens"sv, &TopFields::max_tokens},
      {"max_completion_tokens"sv, &TopFields::max_completion_tokens},
      {"temperature"sv, &TopFields::temperature},
      {"top_p"sv, &TopFields::top_p},
      {"seed"sv, &TopFields::seed},
      {"response_format"sv, &TopFields::response_format},
      {"stop"sv, &TopFields::stop},
      {"hengshi"sv, &TopFields::hengshi},
  };
  TopFields fields;
  for (auto field : members) {
    for (const auto& [known, slot] : kNamed) {
      if (field.key == known) {
        fields.*slot = field.value;
        break;
      }
    }
  }
  return fields;
}

const element* get(const std::optional<element>& field) { return field ? &*field : nullptr; }

}  // namespace

Result<ChatRequest, ApiError> parse_chat_request(std::string_view body) {
  std::shared_ptr<simdjson::dom::document> document = pooled_document();
  // Unknown unless simdjson's parse says: then nothing is spliced.
  TextBeyondDom beyond{.repeated_names = true, .nested_doubles = true};
  std::optional<json> fallback;  // nlohmann's DOM, when simdjson refused the text
  if (!parse_json_document(body, kMaxJsonDepth, *document, &beyond)) {
    // What simdjson refused: nlohmann's parser decides, as it always did (depth first).
    if (json_nesting_exceeds(body, kMaxJsonDepth)) {
      return bad("nesting_too_deep",
                 "request body nests arrays/objects deeper than " + std::to_string(kMaxJsonDepth) + " levels", "");
    }
    fallback = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (fallback->is_discarded()) {
      return bad("invalid_json", "request body is not valid JSON", "");
    }
    // What nlohmann accepted and simdjson did not (an integer beyond 64 bits, which nlohmann
    // reads as a double) is read from the DOM's own text: the same values.
    if (!parse_json_document(dump_text(*fallback), kMaxJsonDepth, *document)) {
      return bad("invalid_json", "request body is not valid JSON", "");
    }
  }
  const element doc = document->root();
  if (!is_object(doc)) return bad("invalid_type", "request body must be a JSON object", "");

  const TopFields top = top_fields(doc.get_object().value_unsafe());
  ChatRequest req;
  if (const element* model = get(top.model)) {
    if (!is_string(*model)) return bad("invalid_type", "model must be a string", "model");
    req.model = string_of(*model);
  }

  const element* messages_field = get(top.messages);
  if (messages_field == nullptr) {
    return bad("missing_required_parameter", "messages is required", "messages");
  }
  if (!is_array(*messages_field)) return bad("invalid_type", "messages must be an array", "messages");
  const simdjson::dom::array messages = messages_field->get_array().value_unsafe();
  if (messages.size() == 0) {
    return bad("invalid_value", "messages must contain at least one message", "messages");
  }
  req.messages.reserve(std::min<std::size_t>(messages.size(), 4096));  // simdjson saturates a huge count
  std::size_t i = 0;
  for (element msg : messages) {
    // Names are built only for an error, and each field is looked up once.
    const auto param = [i] { return "messages[" + std::to_string(i) + "]"; };
    if (!is_object(msg)) return bad("invalid_type", param() + " must be an object", param());
    element role_field;
    if (!member(msg, "role"sv, role_field) || !is_string(role_field)) {
      return bad("missing_required_parameter", param() + ".role is required and must be a string",
                 param() + ".role");
    }
    std::string role(string_of(role_field));
    if (!known_role(role)) {
      return bad("invalid_value",
                 param() + ".role '" + role +
                     "' is not one of system, user, assistant, tool, developer, function",
                 param() + ".role");
    }
    element content;
    const bool has_content = member(msg, "content"sv, content);
    element tool_calls;
    if (!has_content && !(role == "assistant" && member(msg, "tool_calls"sv, tool_calls))) {
      return bad("missing_required_parameter", param() + ".content is required", param() + ".content");
    }
    auto text = content_text(has_content ? &content : nullptr, [&] { return param() + ".content"; });
    if (!text) return text.error();
    req.messages.push_back({std::move(role), std::move(*text)});
    ++i;
  }

  if (const element* stream = get(top.stream)) {
    if (!is_boolean(*stream)) return bad("invalid_type", "stream must be a boolean", "stream");
    req.stream = bool_of(*stream);
  }
  if (const element* opts = get(top.stream_options); opts != nullptr && !is_null(*opts)) {
    if (!is_object(*opts)) {
      return bad("invalid_type", "stream_options must be an object", "stream_options");
    }
    if (element include; member(*opts, "include_usage"sv, include)) {
      if (!is_boolean(include)) {
        return bad("invalid_type", "stream_options.include_usage must be a boolean",
                   "stream_options.include_usage");
      }
      req.include_usage = bool_of(include);
    }
  }
  for (const auto& [key, value] : {std::pair{"max_tokens"sv, get(top.max_tokens)},
                                   std::pair{"max_completion_tokens"sv, get(top.max_completion_tokens)}}) {
    if (value != nullptr && !is_null(*value)) {
      if (!is_integer(*value) || int64_of(*value) <= 0) {
        return bad("invalid_value", std::string(key) + " must be a positive integer", std::string(key));
      }
      req.max_tokens = int64_of(*value);
    }
  }
  auto temperature = bounded_number(get(top.temperature), "temperature", 0.0, 2.0);
  if (!temperature) return temperature.error();
  req.temperature = *temperature;
  auto top_p = bounded_number(get(top.top_p), "top_p", 0.0, 1.0);
  if (!top_p) return top_p.error();
  req.top_p = *top_p;
  if (const element* it = get(top.seed); it != nullptr && !is_null(*it)) {
    if (!is_integer(*it)) return bad("invalid_type", "seed must be an integer", "seed");
    req.seed = int64_of(*it);
  }
  if (const element* it = get(top.response_format); it != nullptr && !is_null(*it)) {
    if (!is_object(*it)) return bad("invalid_type", "response_format must be an object", "response_format");
    element type;
    if (!member(*it, "type"sv, type) || !is_string(type)) {
      return bad("invalid_type", "response_format.type must be a string", "response_format.type");
    }
    req.response_format = string_of(type);
  }
  if (const element* stop = get(top.stop); stop != nullptr && !is_null(*stop)) {
    if (is_string(*stop)) {
      req.stop.emplace_back(string_of(*stop));
    } else if (is_array(*stop)) {
      const simdjson::dom::array stops = stop->get_array().value_unsafe();
      for (element s : stops) {
        if (!is_string(s)) return bad("invalid_type", "stop must be a string or array of strings", "stop");
        req.stop.emplace_back(string_of(s));
      }
    } else {
      return bad("invalid_type", "stop must be a string or array of strings", "stop");
    }
  }
  if (const element* ext_field = get(top.hengshi)) {
    auto ext = parse_extension(*ext_field);
    if (!ext) return ext.error();
    req.hengshi = std::move(*ext);
  }
  req.parsed_body = std::move(document);
  if (fallback) {
    // The DOM is at hand: body() need not build it again.
    fallback->erase("hengshi");
    req.body_dom = std::make_shared<const json>(std::move(*fallback));
  } else if (!beyond.repeated_names && !beyond.nested_doubles) {
    req.forwarded_members = json_raw_members(body, kMembersWrittenAgain);
  }
  return req;
}

}  // namespace hengshi
