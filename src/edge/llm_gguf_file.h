// A GGUF file read whole into memory: its metadata and every tensor with its data, freed
// together. For code that rewrites weights outside llama.cpp (the LoRA export and merge).
// Includes llama.cpp's gguf header: only llm_* files may include this one (STYLE.md).
#pragma once

#include <ggml.h>
#include <gguf.h>

#include <string>

#include "core/result.h"

namespace hengshi::edge {

struct LoadedGguf {
  gguf_context* gguf = nullptr;
  ggml_context* tensors = nullptr;  // also holds the blob the tensors' data point into

  LoadedGguf() = default;
  LoadedGguf(const LoadedGguf&) = delete;
  LoadedGguf& operator=(const LoadedGguf&) = delete;
  ~LoadedGguf() {
    if (gguf != nullptr) gguf_free(gguf);
    if (tensors != nullptr) ggml_free(tensors);
  }

  // Reads `path`; `error_code` names the caller's failure (lora_export_failed, ...).
  Status read(const std::string& path, const char* error_code) {
    gguf = gguf_init_from_file(path.c_str(), {/*no_alloc=*/false, &tensors});
    if (gguf == nullptr) return Error{error_code, "cannot read " + path + " as GGUF"};
    return Ok{};
  }
};

}  // namespace hengshi::edge
