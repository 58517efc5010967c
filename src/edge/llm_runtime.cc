#include "edge/llm_runtime.h"

#include <llama.h>
#include <spdlog/spdlog.h>

#include <mutex>
#include <string_view>

namespace hengshi::edge {
namespace {

thread_local std::string* t_log_capture = nullptr;
thread_local ggml_log_level t_last_level = GGML_LOG_LEVEL_INFO;

void route_llama_log(ggml_log_level level, const char* text, void* /*user_data*/) {
  if (level == GGML_LOG_LEVEL_CONT) {
    level = t_last_level;
  } else {
    t_last_level = level;
  }
  std::string_view message(text);
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) {
    message.remove_suffix(1);
  }
  if (message.empty()) return;
  if (t_log_capture != nullptr && level == GGML_LOG_LEVEL_ERROR) {
    if (!t_log_capture->empty()) t_log_capture->append("; ");
    t_log_capture->append(message);
    spdlog::debug("llama.cpp: {}", message);  // the caller reports it as an error value
    return;
  }
  switch (level) {
    case GGML_LOG_LEVEL_ERROR:
      spdlog::warn("llama.cpp: {}", message);
      break;
    case GGML_LOG_LEVEL_WARN:
      spdlog::debug("llama.cpp: {}", message);
      break;
    default:
      spdlog::trace("llama.cpp: {}", message);
      break;
  }
}

}  // namespace

void init_llama_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    llama_log_set(route_llama_log, nullptr);
    llama_backend_init();
  });
}

LlamaLogCapture::LlamaLogCapture() { t_log_capture = &text_; }
LlamaLogCapture::~LlamaLogCapture() { t_log_capture = nullptr; }

}  // namespace hengshi::edge
