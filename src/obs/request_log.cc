#include "obs/request_log.h"

#include <poll.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>

#include <spdlog/spdlog.h>

namespace hengshi::obs {

Result<std::unique_ptr<RequestLog>> RequestLog::open(const std::string& target) {
  return open(target, Options{});
}

Result<std::unique_ptr<RequestLog>> RequestLog::open(const std::string& target, Options options) {
  if (target.empty()) return to_file(nullptr, false, options);
  if (target == "-") return to_file(stdout, false, options);
  std::FILE* file = std::fopen(target.c_str(), "a");
  if (!file) {
    return Error{"log_unwritable", target + ": cannot open request log: " + std::strerror(errno)};
  }
  // Only a regular file rotates: renaming a FIFO or /dev/stderr would not do what was meant.
  struct stat info {};
  const bool regular = ::fstat(fileno(file), &info) == 0 && S_ISREG(info.st_mode);
  return std::unique_ptr<RequestLog>(new RequestLog(file, true, options, Registry::global(),
                                                    regular ? target : std::string(),
                                                    regular ? info.st_size : 0));
}

std::unique_ptr<RequestLog> RequestLog::to_file(std::FILE* file, bool owned, Options options,
                                                Registry& registry) {
  return std::unique_ptr<RequestLog>(new RequestLog(file, owned, options, registry, {}, 0));
}

RequestLog::RequestLog(std::FILE* file, bool owned, Options options, Registry& registry,
                       std::string path, std::int64_t file_bytes)
    : enabled_(file != nullptr),
      file_(file),
      owned_(owned),
      path_(std::move(path)),
      file_bytes_(file_bytes),
      options_(options) {
  written_total_ =
      &registry.counter("hengshi_request_log_written_total", "Request log lines written");
  dropped_total_ = &registry.counter("hengshi_request_log_dropped_total",
                                     "Request log lines dropped: queue full (slow or "
                                     "blocked log file) or the write failed");
  rotations_total_ = &registry.counter("hengshi_request_log_rotations_total",
                                       "Request log files rotated (log.rotate_bytes / log.rotate_age_s)");
  file_opened_ = std::chrono::steady_clock::now();
  if (file_ != nullptr) {
    // Earlier stdio output to the same file goes first; from here on the descriptor is ours.
    std::fflush(file_);
    writer_ = std::thread([this] { run_writer(); });
  }
}

RequestLog::~RequestLog() {
  if (writer_.joinable()) {
    (void)flush(options_.flush_timeout);
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    abandon_.store(true);  // a line still blocked is given up within one poll step
    queued_.notify_all();
    writer_.join();
  }
  if (owned_ && file_) std::fclose(file_);
}

void RequestLog::write(nlohmann::json record) {
  if (!enabled_) return;
  record["schema"] = kRequestLogSchemaVersion;
  record["ts"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();
  std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  {
    std::lock_guard lock(mutex_);
    if (queue_.size() >= options_.max_queued_lines || stopping_) {
      count_dropped(1);
      return;
    }
    queue_.push_back(std::move(line));
    ++enqueued_;
  }
  queued_.notify_one();
}

bool RequestLog::flush(std::chrono::milliseconds timeout) {
  if (!enabled_) return true;
  std::unique_lock lock(mutex_);
  const std::uint64_t target = enqueued_;
  return drained_.wait_for(lock, timeout, [&] { return finished_ >= target; });
}

void RequestLog::count_dropped(std::uint64_t lines) {
  dropped_.fetch_add(lines, std::memory_order_relaxed);
  dropped_total_->inc(static_cast<double>(lines));
}

void RequestLog::run_writer() {
  // A reader that went away must fail the write with EPIPE, not kill the process: SIGPIPE from
  // write() goes to the writing thread, and this thread never takes it.
  sigset_t pipe_signal;
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);

  std::unique_lock lock(mutex_);
  for (;;) {
    queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping with nothing left
    if (stopping_) {
      // Destruction gave flush() its time already: what is left is dropped, not written.
      count_dropped(queue_.size());
      finished_ += queue_.size();
      queue_.clear();
      drained_.notify_all();
      break;
    }
    std::string line = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    rotate_if_due(line.size());
    bool ok = write_line(line);
    if (ok) file_bytes_ += static_cast<std::int64_t>(line.size());
    if (ok) {
      written_.fetch_add(1, std::memory_order_relaxed);
      written_total_->inc();
    } else {
      count_dropped(1);
    }
    lock.lock();
    ++finished_;
    drained_.notify_all();
  }
}

void RequestLog::rotate_if_due(std::size_t next_line) {
  if (path_.empty() || file_bytes_ == 0) return;  // never an empty file, never stdout or a pipe
  const bool too_big = options_.rotate_bytes > 0 &&
                       file_bytes_ + static_cast<std::int64_t>(next_line) > options_.rotate_bytes;
  const bool too_old = options_.rotate_age.count() > 0 &&
                       std::chrono::steady_clock::now() - file_opened_ >= options_.rotate_age;
  if (!too_big && !too_old) return;
  auto rotated = [&](int n) { return path_ + "." + std::to_string(n); };
  std::error_code ec;
  std::filesystem::remove(rotated(options_.keep), ec);
  for (int n = options_.keep - 1; n >= 1; --n) {
    if (std::filesystem::exists(rotated(n), ec)) std::filesystem::rename(rotated(n), rotated(n + 1), ec);
  }
  std::filesystem::rename(path_, rotated(1), ec);
  std::FILE* fresh = ec ? nullptr : std::fopen(path_.c_str(), "a");
  if (fresh == nullptr) {
    if (!rotation_failed_) {
      spdlog::error("request log {}: cannot rotate ({}); writing on to the current file", path_,
                    ec ? ec.message() : std::strerror(errno));
    }
    rotation_failed_ = true;
    file_opened_ = std::chrono::steady_clock::now();  // try again after another period, not per line
    return;
  }
  std::fclose(file_);
  file_ = fresh;
  file_bytes_ = 0;
  file_opened_ = std::chrono::steady_clock::now();
  rotation_failed_ = false;
  rotations_.fetch_add(1, std::memory_order_relaxed);
  rotations_total_->inc();
}

bool RequestLog::write_line(const std::string& line) {
  const int fd = fileno(file_);
  std::size_t offset = 0;
  while (offset < line.size()) {
    pollfd ready{fd, POLLOUT, 0};
    int polled = ::poll(&ready, 1, static_cast<int>(options_.poll_step.count()));
    if (polled < 0 && errno != EINTR) return false;
    if (polled <= 0) {
      if (abandon_.load()) return false;
      continue;
    }
    if ((ready.revents & (POLLERR | POLLNVAL)) != 0) return false;
    // At most PIPE_BUF per write: once poll() says a pipe is writable, that much fits without
    // blocking, so the writer never sleeps inside write() where stop could not reach it.
    std::size_t piece = std::min<std::size_t>(line.size() - offset, PIPE_BUF);
    ssize_t n = ::write(fd, line.data() + offset, piece);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return false;  // ENOSPC, EPIPE, EIO: this line is lost, the next may
                     // succeed
    }
    offset += static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace hengshi::obs
