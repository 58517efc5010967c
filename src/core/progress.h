// Progress: a one-line counter on stderr for long CLI steps and benchmarks ("calibrate: predicting
// 1200/8000 (15%)"), shown only when stderr is a terminal, so piped and logged runs stay quiet;
// redrawn at most 10 times a second. HENGSHI_PROGRESS=0 turns it off, =1 forces it on.
// Not thread-safe: one Progress per loop, on one thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace hengshi {

class Progress {
 public:
  // `total` 0 = unknown (the count alone is shown).
  Progress(std::string what, std::size_t total, std::FILE* out = stderr);
  ~Progress();  // done()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void advance(std::size_t n = 1);
  // Draws the final count and ends the line (once; nothing when it never drew).
  void done();
  bool enabled() const { return enabled_; }

  // Whether progress goes to `out`: a terminal, unless HENGSHI_PROGRESS says otherwise.
  static bool wanted(std::FILE* out);

 private:
  void draw();

  std::string what_;
  std::size_t total_ = 0;
  std::size_t count_ = 0;
  std::FILE* out_ = nullptr;
  bool enabled_ = false;
  bool drew_ = false;
  bool finished_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace hengshi
