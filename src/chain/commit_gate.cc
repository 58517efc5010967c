#include "chain/commit_gate.h"

#include <nlohmann/json.hpp>

namespace hengshi::chain {

bool ends_a_sentence(std::string_view text) {
  for (std::string_view mark : {"。", "！", "？", "\n"}) {
    if (text.find(mark) != std::string_view::npos) return true;
  }
  for (std::size_t i = 0; i + 1 < text.size(); ++i) {
    const char c = text[i];
    if ((c == '.' || c == '!' || c == '?') && (text[i + 1] == ' ' || text[i + 1] == '\t')) return true;
  }
  return false;
}

bool CommitGate::add_text(std::string_view text) {
  if (reached_) return true;
  if (!text.empty()) ++pieces_;
  text_.append(text);
  if (pieces_ >= config_.tokens || (config_.first_sentence && ends_a_sentence(text_))) {
    reached_ = true;
    text_.clear();
  }
  return reached_;
}

ChunkDelta chunk_delta(std::string_view chunk_json) {
  ChunkDelta out;
  const auto chunk = nlohmann::json::parse(chunk_json, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) return out;
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) return out;
  const auto& choice = (*choices)[0];
  if (auto finish = choice.find("finish_reason"); finish != choice.end() && finish->is_string()) {
    out.finish_reason = finish->get<std::string>();
  }
  const auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return out;
  if (auto content = delta->find("content"); content != delta->end() && content->is_string()) {
    out.content = content->get<std::string>();
  }
  out.tool_calls = delta->contains("tool_calls") || delta->contains("function_call");
  return out;
}

std::string chunk_content(std::string_view chunk_json) {
  const auto chunk = nlohmann::json::parse(chunk_json, nullptr, /*allow_exceptions=*/false);
  if (!chunk.is_object()) return {};
  const auto choices = chunk.find("choices");
  if (choices == chunk.end() || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) return {};
  const auto delta = (*choices)[0].find("delta");
  if (delta == (*choices)[0].end() || !delta->is_object()) return {};
  const auto content = delta->find("content");
  if (content == delta->end() || !content->is_string()) return {};
  return content->get<std::string>();
}

}  // namespace hengshi::chain
