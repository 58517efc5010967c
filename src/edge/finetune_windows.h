// Training windows for llama.cpp's trainer (llama_opt_epoch): fixed-length token windows with a
// label per position. By default each row has a window of its own, padded: packed together, a
// row attends to the rows before it, and FAQ rows of one intent share their answer, so the
// model learns to copy the earlier answer instead of answering the question (train loss 0.19
// while greedy answers scored F1 0.30 on the training questions themselves). Packing (`pack`:
// whole rows, in order, as many as fit) trains up to window/row-length times faster and is
// kept for what only needs a model that moved (tests of serving). A position's label is the next token when that token belongs to the answer, else -1 (the
// prompt, the row's last token, padding), which our patched trainer leaves out of the loss
// (scripts/llama-patches/opt-label-mask.patch). Pure: no llama.cpp here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/result.h"

namespace hengshi::edge {

struct TokenizedRow {
  std::vector<std::int32_t> tokens;  // prompt, then answer
  std::size_t prompt_tokens = 0;     // the first answer token is tokens[prompt_tokens]
};

struct TrainingWindows {
  std::size_t window = 0;
  std::size_t count = 0;             // windows
  std::vector<std::int32_t> tokens;  // count × window
  std::vector<std::int32_t> labels;  // count × window; -1 = no loss
  std::size_t label_positions = 0;   // labels that are not -1
};

// Errors: invalid_argument when a row is longer than the window, or has no answer token.
Result<TrainingWindows> pack_windows(const std::vector<TokenizedRow>& rows, std::size_t window,
                                     std::int32_t pad_token, bool pack = false);

}  // namespace hengshi::edge
