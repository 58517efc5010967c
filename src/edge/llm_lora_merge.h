// Folds a LoRA adapter into a copy of its base model: W' = W + scale · (alpha / r) · B·A for
// every matrix the adapter carries, stored in W's own type (dequantised, summed, quantised
// again). A merged model generates at the base's speed; a runtime adapter (llama.cpp applying
// B·A at every token) costs 17–41% of it at Qwen2-0.5B's width (bench/edge_finetune). The price is
// memory: one copy of the base per merged adapter.
#pragma once

#include <string>

#include "core/result.h"

namespace hengshi::edge {

struct LoraMergeReport {
  int tensors = 0;          // matrices the adapter changed
  double seconds = 0.0;     // read, merge and write
};

// Reads `base_path` and `adapter_path` (any adapter llama_adapter_lora_init accepts: lora_a /
// lora_b pairs, F32 or F16), writes the merged model to `out_path` with the base's metadata.
// Errors: lora_merge_failed naming the file or tensor (a pair without its base matrix, shapes
// that do not match, a base type that cannot be quantised without an importance matrix).
Result<LoraMergeReport> merge_lora_adapter(const std::string& base_path, const std::string& adapter_path,
                                           float scale, const std::string& out_path);

}  // namespace hengshi::edge
