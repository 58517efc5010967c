// Training rows for `hengshi finetune`: conversations whose last message is the assistant answer
// the model should learn, read from JSON Lines in one of three shapes:
//   {"messages": [{"role": "user", "content": "..."}, ..., {"role": "assistant", ...}]}
//   {"text": "question", "answer": "answer"}
//   {"text": "question", "intent": "name"}   (FAQ: the answer of the intent's row that has one)
// FAQ rows whose intent has no answer anywhere in the file are skipped and counted, not lost
// silently. Pure: no llama.cpp here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/chat_request.h"
#include "core/result.h"

namespace hengshi::edge {

struct FinetuneRow {
  std::vector<ChatMessage> messages;  // the last one is the assistant's answer
  std::size_t line = 0;               // 1-based line in the file
  std::string intent;                 // a FAQ row's intent ("__oos__": out of scope); "" otherwise
  const std::string& answer() const { return messages.back().text; }
  // Every message but the answer: what the model is asked.
  std::vector<ChatMessage> prompt() const {
    return {messages.begin(), messages.end() - 1};
  }
};

struct FinetuneData {
  std::vector<FinetuneRow> rows;
  std::size_t skipped_without_answer = 0;  // FAQ rows whose intent has no answer (not __oos__)
  // __oos__ rows when no __oos__ row gives a refusal answer: nothing to learn, but the gate asks
  // them (answer() is ""). With a refusal answer they are ordinary rows, trained to refuse.
  std::vector<FinetuneRow> out_of_scope;
};

// Errors: data_invalid naming the file and line (bad JSON, a missing field, a conversation
// that does not end with a non-empty assistant message, no usable row at all).
Result<FinetuneData> read_finetune_rows(const std::string& path);

// Splits rows into training and held-out sets: in each group of rows sharing an answer,
// round(share × size) rows chosen by `seed` are held out, but never the group's last row, so
// every held-out row is a paraphrase of a question trained on. Same rows + share + seed = the
// same split on every machine.
struct FinetuneSplit {
  std::vector<FinetuneRow> train;
  std::vector<FinetuneRow> heldout;
};
FinetuneSplit split_heldout(const std::vector<FinetuneRow>& rows, double share, std::uint64_t seed);

// A fully specified generator (splitmix64) and Fisher–Yates on it: std::shuffle's algorithm is
// the library's choice, and `same seed = same model` must hold across machines.
class SeededOrder {
 public:
  explicit SeededOrder(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();
  template <typename T>
  void shuffle(std::vector<T>& items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      std::swap(items[i - 1], items[static_cast<std::size_t>(next() % i)]);
    }
  }

 private:
  std::uint64_t state_;
};

}  // namespace hengshi::edge
