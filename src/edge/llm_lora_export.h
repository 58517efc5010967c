// Writes a LoRA adapter GGUF that llama.cpp loads with llama_adapter_lora_init: for every F32
// matrix that differs between a fine-tuned model and its base, the rank-r factors of the
// difference (lora_delta.h) as "<tensor>.lora_a" / "<tensor>.lora_b", with general.type
// "adapter", adapter.type "lora" and adapter.lora.alpha = r (so a scale of 1 applies B·A as is).
#pragma once

#include <string>

#include "core/result.h"

namespace hengshi::edge {

struct LoraExportReport {
  int rank = 0;
  int tensors = 0;                    // matrices in the adapter
  double worst_relative_error = 0.0;  // max over matrices of ||Δ - B·A||_F / ||Δ||_F
  double mean_relative_error = 0.0;
};

// Both files are F32 GGUFs of the same architecture and tensor shapes (what `finetune` saves).
// `f16_factors`: write lora_a/lora_b as F16 (half the bytes a decoded token reads) rather than
// F32. Errors: lora_export_failed naming the file or tensor.
Result<LoraExportReport> export_lora_adapter(const std::string& base_path,
                                             const std::string& tuned_path,
                                             const std::string& out_path, int rank, bool f16_factors);

}  // namespace hengshi::edge
