#include "edge/finetune_windows.h"

#include <string>

namespace hengshi::edge {

Result<TrainingWindows> pack_windows(const std::vector<TokenizedRow>& rows, std::size_t window,
                                     std::int32_t pad_token, bool pack) {
  if (window < 2) return Error{"invalid_argument", "a training window needs at least 2 tokens"};
  TrainingWindows out;
  out.window = window;
  auto pad_to_end = [&] {
    while (out.tokens.size() % window != 0) {
      out.tokens.push_back(pad_token);
      out.labels.push_back(-1);
    }
  };
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const auto& row = rows[r];
    if (row.tokens.size() > window) {
      return Error{"invalid_argument", "training row " + std::to_string(r + 1) + " is " +
                                           std::to_string(row.tokens.size()) +
                                           " tokens; the window holds " + std::to_string(window)};
    }
    if (row.prompt_tokens == 0 || row.prompt_tokens >= row.tokens.size()) {
      return Error{"invalid_argument",
                   "training row " + std::to_string(r + 1) + " has no prompt or no answer token"};
    }
    if (!pack || out.tokens.size() % window + row.tokens.size() > window) pad_to_end();
    for (std::size_t k = 0; k < row.tokens.size(); ++k) {
      out.tokens.push_back(row.tokens[k]);
      // Position k predicts token k+1: a label only when that token is part of the answer.
      const bool learn = k + 1 < row.tokens.size() && k + 1 >= row.prompt_tokens;
      out.labels.push_back(learn ? row.tokens[k + 1] : -1);
      if (learn) ++out.label_positions;
    }
  }
  pad_to_end();
  out.count = out.tokens.size() / window;
  return out;
}

}  // namespace hengshi::edge
