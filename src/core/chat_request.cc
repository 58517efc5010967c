#include "core/chat_request.h"

#include <array>
#include <optional>
#include <utility>

#include "core/json_fast_parse.h"
#include "core/json_raw_members.h"
#include "core/json_text.h"

namespace hengshi {

// Keys as string_views: a lookup by `const char*` runs strlen at every comparison of the map walk.
using namespace std::string_view_literals;
namespace {

using nlohmann::json;

constexpr std::array kKnownRoles = {"system", "user", "assistant", "tool", "developer", "function"};

bool known_role(const std::string& role) {
  for (const char* known : kKnownRoles) {
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
template <typename Param>
Result<std::string, ApiError> content_text(const json& content, const Param& param) {
  if (content.is_string()) return content.get<std::string>();
  if (content.is_null()) return std::string();
  if (!content.is_array()) {
    return bad("invalid_type", param() + " must be a string or an array of content parts", param());
  }
  std::string text;
  for (std::size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const auto part_param = [&] { return param() + "[" + std::to_string(i) + "]"; };
    const auto type = part.is_object() ? part.find("type"sv) : part.end();
    if (!part.is_object() || type == part.end() || !type->is_string()) {
      return bad("invalid_type", part_param() + " must be an object with a string \"type\"", part_param());
    }
    if (*type == "text") {
      const auto part_text = part.find("text"sv);
      if (part_text == part.end() || !part_text->is_string()) {
        return bad("invalid_type", part_param() + ".text must be a string", part_param() + ".text");
      }
      if (!text.empty()) text += '\n';
      text += part_text->get_ref<const std::string&>();
    }
  }
  return text;
}

Result<HengshiExtension, ApiError> parse_extension(const json& ext) {
  HengshiExtension out;
  if (!ext.is_object()) return bad("invalid_type", "hengshi must be an object", "hengshi");
  for (const auto& [key, value] : ext.items()) {
    std::string param = "hengshi." + key;
    if (key == "task_type" || key == "session_id" || key == "pii_policy") {
      if (!value.is_string()) return bad("invalid_type", param + " must be a string", param);
      std::string text = value.get<std::string>();
      const std::size_t limit = key == "session_id" ? kMaxSessionIdBytes : kMaxTaskTypeBytes;
      if (text.size() > limit) {
        return bad("invalid_value", param + " must be at most " + std::to_string(limit) + " bytes", param);
      }
      if (key == "task_type") out.task_type = std::move(text);
      else if (key == "session_id") out.session_id = std::move(text);
      else out.pii_policy = std::move(text);
    } else if (key == "deadline_ms") {
      if (!value.is_number_integer() || value.get<std::int64_t>() <= 0) {
        return bad("invalid_value", param + " must be a positive integer (milliseconds)", param);
      }
      auto deadline = check_deadline_ms(value.get<std::int64_t>(), param);
      if (!deadline) return deadline.error();
      out.deadline_ms = *deadline;
    } else if (key == "cache") {
      if (!value.is_boolean()) return bad("invalid_type", param + " must be a boolean", param);
      out.cache = value.get<bool>();
    } else if (key == "commit") {
      const auto mode = value.is_string() ? commit_mode_from_string(value.get_ref<const std::string&>())
                                          : std::nullopt;
      if (!mode) return bad("invalid_value", param + " must be \"adaptive\", \"always\" or \"never\"", param);
      out.commit = *mode;
    } else if (key == "tags") {
      if (!value.is_array()) return bad("invalid_type", param + " must be an array of strings", param);
      if (value.size() > 32) return bad("invalid_value", param + " holds at most 32 tags", param);
      for (const auto& tag : value) {
        if (!tag.is_string()) return bad("invalid_type", param + " must be an array of strings", param);
        if (tag.get_ref<const std::string&>().size() > kMaxTaskTypeBytes) {
          return bad("invalid_value", param + " entries must be at most " + std::to_string(kMaxTaskTypeBytes) + " bytes", param);
        }
        out.tags.push_back(tag.get<std::string>());
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

Result<std::int64_t, ApiError> check_deadline_ms(std::int64_t value, const std::string& param) {
  if (value <= 0 || value > kMaxDeadlineMs) {
    return bad("invalid_value",
               param + " must be between 1 and " + std::to_string(kMaxDeadlineMs) + " (milliseconds)", param);
  }
  return value;
}

namespace {

// A number field within [low, high], or absent (nullptr) / null.
Result<std::optional<double>, ApiError> bounded_number(const json* field, std::string_view key, double low,
                                                       double high) {
  if (field == nullptr || field->is_null()) return std::optional<double>();
  if (!field->is_number()) return bad("invalid_type", std::string(key) + " must be a number", std::string(key));
  const double value = field->get<double>();
  if (!(value >= low && value <= high)) {
    return bad("invalid_value",
               std::string(key) + " must be between " + dump_text(low) + " and " + dump_text(high), std::string(key));
  }
  return std::optional<double>(value);
}

// The top-level members parse_chat_request reads, found in one walk over the body's members: a
// find() per field walked the key map, comparing strings at each node, a dozen times a request.
struct TopFields {
  const json* model = nullptr;
  const json* messages = nullptr;
  const json* stream = nullptr;
  const json* stream_options = nullptr;
  const json* max_tokens = nullptr;
  const json* max_completion_tokens = nullptr;
  const json* temperature = nullptr;
  const json* top_p = nullptr;
  const json* seed = nullptr;
  const json* response_format = nullptr;
  const json* stop = nullptr;
  json::object_t::iterator hengshi;  // end() when absent
};

TopFields top_fields(json::object_t& members) {
  static constexpr std::pair<std::string_view, const json* TopFields::*> kNamed[] = {
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
  };
  TopFields fields;
  fields.hengshi = members.end();
  for (auto it = members.begin(); it != members.end(); ++it) {
    const std::string_view name = it->first;
    if (name == "hengshi"sv) {
      fields.hengshi = it;
      continue;
    }
    for (const auto& [known, field] : kNamed) {
      if (name == known) {
        fields.*field = &it->second;
        break;
      }
    }
  }
  return fields;
}

}  // namespace

Result<ChatRequest, ApiError> parse_chat_request(std::string_view body) {
  // Unknown unless simdjson's parse says: then nothing is spliced.
  TextBeyondDom beyond{.repeated_names = true, .nested_doubles = true};
  std::optional<json> fast = parse_json_fast(body, kMaxJsonDepth, &beyond);
  if (!fast) {
    // What simdjson refused: nlohmann's parser decides, as it always did (depth first).
    if (json_nesting_exceeds(body, kMaxJsonDepth)) {
      return bad("nesting_too_deep",
                 "request body nests arrays/objects deeper than " + std::to_string(kMaxJsonDepth) + " levels", "");
    }
    fast = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (fast->is_discarded()) {
      return bad("invalid_json", "request body is not valid JSON", "");
    }
  }
  json& doc = *fast;
  if (!doc.is_object()) return bad("invalid_type", "request body must be a JSON object", "");

  const TopFields top = top_fields(doc.get_ref<json::object_t&>());
  ChatRequest req;
  if (const json* model = top.model) {
    if (!model->is_string()) return bad("invalid_type", "model must be a string", "model");
    req.model = model->get<std::string>();
  }

  const json* messages_field = top.messages;
  if (messages_field == nullptr) {
    return bad("missing_required_parameter", "messages is required", "messages");
  }
  const json& messages = *messages_field;
  if (!messages.is_array()) return bad("invalid_type", "messages must be an array", "messages");
  if (messages.empty()) {
    return bad("invalid_value", "messages must contain at least one message", "messages");
  }
  const json no_content;  // null: an assistant turn with tool calls only
  req.messages.reserve(messages.size());
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const json& msg = messages[i];
    // Names are built only for an error, and each field is looked up once.
    const auto param = [i] { return "messages[" + std::to_string(i) + "]"; };
    if (!msg.is_object()) return bad("invalid_type", param() + " must be an object", param());
    const auto role_field = msg.find("role"sv);
    if (role_field == msg.end() || !role_field->is_string()) {
      return bad("missing_required_parameter", param() + ".role is required and must be a string",
                 param() + ".role");
    }
    std::string role = role_field->get<std::string>();
    if (!known_role(role)) {
      return bad("invalid_value",
                 param() + ".role '" + role +
                     "' is not one of system, user, assistant, tool, developer, function",
                 param() + ".role");
    }
    const auto content = msg.find("content"sv);
    if (content == msg.end() && !(role == "assistant" && msg.contains("tool_calls"sv))) {
      return bad("missing_required_parameter", param() + ".content is required", param() + ".content");
    }
    auto text = content_text(content != msg.end() ? *content : no_content, [&] { return param() + ".content"; });
    if (!text) return text.error();
    req.messages.push_back({std::move(role), std::move(*text)});
  }

  if (const json* stream = top.stream) {
    if (!stream->is_boolean()) return bad("invalid_type", "stream must be a boolean", "stream");
    req.stream = stream->get<bool>();
  }
  if (const json* opts = top.stream_options; opts != nullptr && !opts->is_null()) {
    if (!opts->is_object()) {
      return bad("invalid_type", "stream_options must be an object", "stream_options");
    }
    if (const auto include = opts->find("include_usage"); include != opts->end()) {
      if (!include->is_boolean()) {
        return bad("invalid_type", "stream_options.include_usage must be a boolean",
                   "stream_options.include_usage");
      }
      req.include_usage = include->get<bool>();
    }
  }
  for (const auto& [key, value] : {std::pair{"max_tokens"sv, top.max_tokens},
                                   std::pair{"max_completion_tokens"sv, top.max_completion_tokens}}) {
    if (value != nullptr && !value->is_null()) {
      if (!value->is_number_integer() || value->get<std::int64_t>() <= 0) {
        return bad("invalid_value", std::string(key) + " must be a positive integer", std::string(key));
      }
      req.max_tokens = value->get<std::int64_t>();
    }
  }
  auto temperature = bounded_number(top.temperature, "temperature", 0.0, 2.0);
  if (!temperature) return temperature.error();
  req.temperature = *temperature;
  auto top_p = bounded_number(top.top_p, "top_p", 0.0, 1.0);
  if (!top_p) return top_p.error();
  req.top_p = *top_p;
  if (const json* it = top.seed; it != nullptr && !it->is_null()) {
    if (!it->is_number_integer()) return bad("invalid_type", "seed must be an integer", "seed");
    req.seed = it->get<std::int64_t>();
  }
  if (const json* it = top.response_format; it != nullptr && !it->is_null()) {
    if (!it->is_object()) return bad("invalid_type", "response_format must be an object", "response_format");
    auto type = it->find("type"sv);
    if (type == it->end() || !type->is_string()) {
      return bad("invalid_type", "response_format.type must be a string", "response_format.type");
    }
    req.response_format = type->get<std::string>();
  }
  if (const json* stop_field = top.stop; stop_field != nullptr && !stop_field->is_null()) {
    const json& stop = *stop_field;
    if (stop.is_string()) {
      req.stop.push_back(stop.get<std::string>());
    } else if (stop.is_array()) {
      for (const auto& s : stop) {
        if (!s.is_string()) return bad("invalid_type", "stop must be a string or array of strings", "stop");
        req.stop.push_back(s.get<std::string>());
      }
    } else {
      return bad("invalid_type", "stop must be a string or array of strings", "stop");
    }
  }
  if (top.hengshi != doc.get_ref<json::object_t&>().end()) {
    auto ext = parse_extension(top.hengshi->second);
    if (!ext) return ext.error();
    req.hengshi = std::move(*ext);
    doc.get_ref<json::object_t&>().erase(top.hengshi);
  }
  req.body = std::move(doc);
  if (!beyond.repeated_names && !beyond.nested_doubles) {
    req.forwarded_members = json_raw_members(body, kMembersWrittenAgain);
  }
  return req;
}

}  // namespace hengshi
