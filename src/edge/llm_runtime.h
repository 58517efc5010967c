// What every user of llama.cpp in the process shares (the engine, the embedder): one-time
// backend initialisation, and llama.cpp's log routed to spdlog. No llama.cpp header here.
#pragma once

#include <string>

namespace hengshi::edge {

// llama_backend_init() and the log hook, once per process. Thread-safe.
void init_llama_once();

// Collects llama.cpp's error lines logged on this thread while alive, so a failed load can say
// why (instead of a bare null pointer).
class LlamaLogCapture {
 public:
  LlamaLogCapture();
  ~LlamaLogCapture();
  LlamaLogCapture(const LlamaLogCapture&) = delete;
  LlamaLogCapture& operator=(const LlamaLogCapture&) = delete;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

}  // namespace hengshi::edge
