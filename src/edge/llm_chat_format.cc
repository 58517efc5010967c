#include "edge/llm_chat_format.h"

#include <algorithm>
#include <cstdint>

namespace hengshi::edge {

ChatFormat ChatFormat::for_model(const llama_model* model) {
  ChatFormat format;
  format.vocab_ = llama_model_get_vocab(model);
  const char* model_template = llama_model_chat_template(model, nullptr);
  const std::vector<ChatMessage> probe{{"user", "hi"}};
  if (model_template != nullptr && *model_template != '\0' &&
      !format.apply(model_template, probe, true).empty()) {
    format.template_text_ = model_template;
    format.kind_ = Kind::model;
    format.source_ = "model";
  } else if (format.tokenize_continuation("<|im_start|>").size() == 1) {
    format.template_text_ = "chatml";
    format.kind_ = Kind::chatml;
    format.source_ = "chatml (fallback)";
  }
  return format;
}

std::string ChatFormat::apply(const char* tmpl, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt) const {
  std::vector<llama_chat_message> chat;
  chat.reserve(messages.size());
  std::size_t chars = 0;
  for (const auto& message : messages) {
    const char* role = message.role == "system" || message.role == "developer" ? "system"
                       : message.role == "assistant"                           ? "assistant"
                                                                               : "user";
    chat.push_back({role, message.text.c_str()});
    chars += message.text.size();
  }
  std::string out(2 * chars + 256, '\0');
  int n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_generation_prompt,
                                    out.data(), static_cast<std::int32_t>(out.size()));
  if (n > static_cast<int>(out.size())) {
    out.resize(static_cast<std::size_t>(n));
    n = llama_chat_apply_template(tmpl, chat.data(), chat.size(), add_generation_prompt,
                                  out.data(), n);
  }
  if (n < 0) return {};
  out.resize(static_cast<std::size_t>(n));
  return out;
}

std::string ChatFormat::render(const std::vector<ChatMessage>& messages,
                               bool add_generation_prompt) const {
  if (kind_ != Kind::plain) {
    std::string text = apply(template_text_.c_str(), messages, add_generation_prompt);
    if (!text.empty() || messages.empty()) return text;
  }
  // A neutral transcript for models without a usable template.
  std::string text;
  for (const auto& message : messages) {
    const bool system = message.role == "system" || message.role == "developer";
    text += system ? "System: " : message.role == "assistant" ? "Assistant: " : "User: ";
    text += message.text;
    text += "\n";
  }
  if (add_generation_prompt) text += "Assistant:";
  return text;
}

std::vector<llama_token> ChatFormat::tokens(std::string_view text, bool add_special) const {
  const auto length = static_cast<std::int32_t>(text.size());
  int n = -llama_tokenize(vocab_, text.data(), length, nullptr, 0, add_special, true);
  std::vector<llama_token> out(static_cast<std::size_t>(std::max(n, 0)));
  n = llama_tokenize(vocab_, text.data(), length, out.data(), static_cast<std::int32_t>(out.size()),
                     add_special, true);
  out.resize(static_cast<std::size_t>(std::max(n, 0)));
  return out;
}

std::vector<llama_token> ChatFormat::tokenize(std::string_view text) const {
  auto out = tokens(text, /*add_special=*/true);
  const llama_token bos = llama_vocab_bos(vocab_);
  if (out.size() >= 2 && out[0] == bos && out[1] == bos) out.erase(out.begin());
  return out;
}

std::vector<llama_token> ChatFormat::tokenize_continuation(std::string_view text) const {
  return tokens(text, /*add_special=*/false);
}

}  // namespace hengshi::edge
