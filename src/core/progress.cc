#include "core/progress.h"

#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace hengshi {

bool Progress::wanted(std::FILE* out) {
  if (const char* setting = std::getenv("HENGSHI_PROGRESS")) {
    const std::string_view value(setting);
    if (value == "0") return false;
    if (value == "1") return true;
  }
  return out != nullptr && ::isatty(fileno(out)) == 1;
}

Progress::Progress(std::string what, std::size_t total, std::FILE* out)
    : what_(std::move(what)), total_(total), out_(out), enabled_(wanted(out)) {}

Progress::~Progress() { done(); }

void Progress::advance(std::size_t n) {
  count_ += n;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drew_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw();
}

void Progress::draw() {
  if (total_ > 0) {
    std::fprintf(out_, "\r%s %zu/%zu (%.0f%%)", what_.c_str(), count_, total_,
                 100.0 * static_cast<double>(count_) / static_cast<double>(total_));
  } else {
    std::fprintf(out_, "\r%s %zu", what_.c_str(), count_);
  }
  std::fflush(out_);
  drew_ = true;
}

void Progress::done() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_ || !drew_) return;
  draw();
  std::fputc('\n', out_);
  std::fflush(out_);
}

}  // namespace hengshi
