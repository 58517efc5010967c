// ChatFormat: how a model sees a conversation — its chat template (the model's own, else ChatML
// when the vocabulary has its tokens, else a plain transcript) and its tokenizer. The engine
// renders prompts with it and `hengshi finetune` renders training rows with it, so a fine-tuned
// model is trained on exactly the text it is later served.
//
// Internal to edge/: it includes llama.h, so only llm_*.cc files include it (STYLE.md).
#pragma once

#include <llama.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/chat_request.h"

namespace hengshi::edge {

class ChatFormat {
 public:
  // The vocabulary must outlive the format (it belongs to the model).
  static ChatFormat for_model(const llama_model* model);

  // The conversation as text. With `add_generation_prompt` it ends where the assistant's next
  // turn begins (what the engine decodes); without, it closes the last message (what training
  // reads: the prompt is then a prefix of it).
  std::string render(const std::vector<ChatMessage>& messages,
                     bool add_generation_prompt = true) const;
  // Tokens with the vocabulary's BOS added and special tokens parsed; a template that writes BOS
  // itself does not get two.
  std::vector<llama_token> tokenize(std::string_view text) const;
  // Tokens of a continuation: no BOS added, special tokens parsed.
  std::vector<llama_token> tokenize_continuation(std::string_view text) const;

  // "model", "chatml (fallback)" or "plain (fallback)".
  const std::string& source() const { return source_; }
  bool uses_model_template() const { return kind_ == Kind::model; }

 private:
  enum class Kind { model, chatml, plain };
  std::string apply(const char* tmpl, const std::vector<ChatMessage>& messages,
                    bool add_generation_prompt) const;
  std::vector<llama_token> tokens(std::string_view text, bool add_special) const;

  const llama_vocab* vocab_ = nullptr;
  std::string template_text_;  // the model's template, or "chatml"; empty for plain
  Kind kind_ = Kind::plain;
  std::string source_ = "plain (fallback)";
};

}  // namespace hengshi::edge
