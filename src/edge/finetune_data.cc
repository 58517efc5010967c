#include "edge/finetune_data.h"

#include <cmath>
#include <map>
#include <unordered_map>
#include <utility>

#include "core/json_lines.h"
#include "edge/intent_dataset.h"

namespace hengshi::edge {
namespace {

// The message content as text: a string, or the text parts of an array (as chat requests are).
std::string content_text(const nlohmann::json& content, bool& ok) {
  ok = true;
  if (content.is_string()) return content.get<std::string>();
  std::string text;
  if (content.is_array()) {
    for (const auto& part : content) {
      if (part.is_object() && part.value("type", "") == "text" && part.contains("text") &&
          part["text"].is_string()) {
        text += part["text"].get<std::string>();
      }
    }
    return text;
  }
  ok = false;
  return text;
}

std::string read_messages(const nlohmann::json& list, std::vector<ChatMessage>& out) {
  if (!list.is_array() || list.empty()) return "\"messages\" must be a non-empty array";
  for (const auto& message : list) {
    if (!message.is_object() || !message.contains("role") || !message["role"].is_string()) {
      return "every message needs a string \"role\"";
    }
    const std::string role = message["role"].get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant") {
      return "role \"" + role + "\" is not system, developer, user or assistant";
    }
    bool ok = false;
    std::string text = content_text(message.value("content", nlohmann::json()), ok);
    if (!ok) return "a message's \"content\" must be a string or an array of text parts";
    out.push_back({role, std::move(text)});
  }
  if (out.back().role != "assistant" || is_blank(out.back().text)) {
    return "the last message must be a non-empty assistant answer (what the model learns)";
  }
  if (out.size() < 2) return "the conversation needs a message before the answer";
  return {};
}

}  // namespace

std::uint64_t SeededOrder::next() {
  std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

Result<FinetuneData> read_finetune_rows(const std::string& path) {
  FinetuneData data;
  // FAQ rows name an intent; its answer may come on a later line, so they are resolved last.
  struct PendingFaq {
    std::string text;
    std::string intent;
    std::size_t line;
  };
  std::vector<PendingFaq> pending;
  std::unordered_map<std::string, std::string> intent_answer;
  std::vector<std::pair<std::size_t, FinetuneRow>> ready;  // (line, row)

  Status read = for_each_json_line(path, [&](const nlohmann::json& row, std::size_t line) {
    if (!row.is_object()) return std::string("a row must be a JSON object");
    if (row.contains("messages")) {
      FinetuneRow parsed;
      parsed.line = line;
      if (std::string why = read_messages(row["messages"], parsed.messages); !why.empty()) {
        return why;
      }
      ready.emplace_back(line, std::move(parsed));
      return std::string();
    }
    std::string text;
    if (std::string why = required_string(row, "text", text); !why.empty()) {
      return why + " (or give \"messages\")";
    }
    std::string answer;
    if (row.contains("answer")) {
      if (std::string why = required_string(row, "answer", answer); !why.empty()) return why;
    }
    std::string intent;
    if (row.contains("intent")) {
      if (std::string why = required_string(row, "intent", intent); !why.empty()) return why;
    }
    if (!answer.empty() && !intent.empty()) intent_answer.emplace(intent, answer);
    if (!answer.empty()) {
      FinetuneRow parsed;
      parsed.line = line;
      parsed.intent = intent;
      parsed.messages = {{"user", text}, {"assistant", answer}};
      ready.emplace_back(line, std::move(parsed));
    } else if (!intent.empty()) {
      pending.push_back({std::move(text), std::move(intent), line});
    } else {
      return std::string("a row needs \"answer\", \"intent\" or \"messages\"");
    }
    return std::string();
  });
  if (!read) return read.error();

  for (auto& faq : pending) {
    const auto found = intent_answer.find(faq.intent);
    FinetuneRow parsed;
    parsed.line = faq.line;
    parsed.intent = faq.intent;
    if (found == intent_answer.end()) {
      if (faq.intent == kOutOfScopeIntent) {
        parsed.messages = {{"user", std::move(faq.text)}, {"assistant", ""}};
        data.out_of_scope.push_back(std::move(parsed));
      } else {
        ++data.skipped_without_answer;
      }
      continue;
    }
    parsed.messages = {{"user", std::move(faq.text)}, {"assistant", found->second}};
    ready.emplace_back(faq.line, std::move(parsed));
  }
  std::map<std::size_t, FinetuneRow> by_line;  // file order, whatever the shape
  for (auto& [line, row] : ready) by_line.emplace(line, std::move(row));
  for (auto& [line, row] : by_line) data.rows.push_back(std::move(row));
  if (data.rows.empty()) {
    return data_error(path, 0, "no row with an answer to learn (FAQ intents need one row with "
                               "\"answer\")");
  }
  return data;
}

FinetuneSplit split_heldout(const std::vector<FinetuneRow>& rows, double share,
                            std::uint64_t seed) {
  std::map<std::string, std::vector<std::size_t>> groups;  // answer → row indexes, file order
  for (std::size_t i = 0; i < rows.size(); ++i) groups[rows[i].answer()].push_back(i);
  std::vector<char> held(rows.size(), 0);
  SeededOrder order(seed);
  for (auto& [answer, members] : groups) {
    const auto wanted = static_cast<std::size_t>(std::lround(share * double(members.size())));
    const std::size_t count = std::min(wanted, members.size() - 1);
    std::vector<std::size_t> shuffled = members;
    order.shuffle(shuffled);
    for (std::size_t k = 0; k < count; ++k) held[shuffled[k]] = 1;
  }
  FinetuneSplit split;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    (held[i] ? split.heldout : split.train).push_back(rows[i]);
  }
  return split;
}

}  // namespace hengshi::edge
