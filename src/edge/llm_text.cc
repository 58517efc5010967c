#include "edge/llm_text.h"

#include <algorithm>
#include <utility>

namespace hengshi::edge {
namespace {

// Expected length of a UTF-8 sequence from its lead byte; 0 for a continuation byte.
std::size_t utf8_sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) return 2;
  if ((lead & 0xF0) == 0xE0) return 3;
  if ((lead & 0xF8) == 0xF0) return 4;
  if ((lead & 0xC0) == 0x80) return 0;
  return 1;  // invalid lead byte: let it through rather than hold it forever
}

// Cuts `text` to at most `max_chars` UTF-8 characters, appending "…" when something was cut.
std::string truncate_chars(const std::string& text, std::size_t max_chars) {
  std::size_t chars = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    if (chars == max_chars) return text.substr(0, i) + "…";
    std::size_t length = std::max<std::size_t>(1, utf8_sequence_length(text[i]));
    i = std::min(text.size(), i + length);
    ++chars;
  }
  return text;
}

}  // namespace

std::size_t incomplete_utf8_tail(std::string_view text) {
  // A sequence is at most 4 bytes: look back over at most 3 continuation bytes for its lead.
  std::size_t look = std::min<std::size_t>(text.size(), 4);
  for (std::size_t back = 1; back <= look; ++back) {
    auto byte = static_cast<unsigned char>(text[text.size() - back]);
    std::size_t length = utf8_sequence_length(byte);
    if (length == 0) continue;  // continuation byte: keep looking for the lead
    return length > back ? back : 0;
  }
  return 0;
}

StopFilter::StopFilter(std::vector<std::string> stop_sequences) {
  for (auto& stop : stop_sequences) {
    if (!stop.empty()) stops_.push_back(std::move(stop));
  }
}

std::string StopFilter::append(std::string_view generated) {
  if (stopped_) return {};
  pending_.append(generated);

  // Earliest complete stop sequence. A match cannot start in already emitted text: any suffix
  // that could begin one was held back.
  std::size_t stop_at = std::string::npos;
  for (const auto& stop : stops_) stop_at = std::min(stop_at, pending_.find(stop));
  if (stop_at != std::string::npos) {
    stopped_ = true;
    std::string out = release(stop_at);
    pending_.clear();
    return out;
  }

  // Hold back the longest suffix that is a proper prefix of a stop sequence.
  std::size_t hold = 0;
  for (const auto& stop : stops_) {
    std::size_t longest = std::min(stop.size() - 1, pending_.size());
    for (std::size_t k = longest; k > hold; --k) {
      if (std::string_view(pending_).substr(pending_.size() - k) ==
          std::string_view(stop).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  std::size_t ready = pending_.size() - hold;
  ready -= incomplete_utf8_tail(std::string_view(pending_).substr(0, ready));
  return release(ready);
}

std::string StopFilter::finish() {
  if (stopped_) return {};
  std::size_t ready = pending_.size() - incomplete_utf8_tail(pending_);
  std::string out = release(ready);
  pending_.clear();  // an incomplete character at the very end is dropped
  return out;
}

std::string StopFilter::release(std::size_t length) {
  std::string out = pending_.substr(0, length);
  pending_.erase(0, length);
  emitted_ += out;
  return out;
}

std::vector<ChatMessage> build_edge_messages(const std::vector<ChatMessage>& conversation,
                                             const EdgePromptOptions& options) {
  std::string system;
  std::vector<const ChatMessage*> dialogue;
  for (const auto& message : conversation) {
    if (message.role == "system" || message.role == "developer") {
      if (!system.empty()) system += "\n";
      system += message.text;
    } else if (message.role == "user" || message.role == "assistant") {
      dialogue.push_back(&message);
    }
  }

  // Walk back to the start of the N-th last user turn.
  std::size_t first = dialogue.size();
  int turns = 0;
  while (first > 0 && turns < std::max(1, options.summary_turns)) {
    --first;
    if (dialogue[first]->role == "user") ++turns;
  }
  std::size_t last_user = dialogue.size();
  for (std::size_t i = dialogue.size(); i-- > first;) {
    if (dialogue[i]->role == "user") {
      last_user = i;
      break;
    }
  }

  std::vector<ChatMessage> out;
  if (!system.empty()) out.push_back({"system", system});
  for (std::size_t i = first; i < dialogue.size(); ++i) {
    const auto& message = *dialogue[i];
    out.push_back({message.role, i == last_user
                                     ? message.text
                                     : truncate_chars(message.text, options.earlier_turn_chars)});
  }
  return out;
}

}  // namespace hengshi::edge
