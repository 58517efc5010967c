#include "obs/request_log.h"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>

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
  return to_file(file, true, options);
}

std::unique_ptr<RequestLog> RequestLog::to_file(std::FILE* file, bool owned, Options options,
                                                Registry& registry) {
  return std::unique_ptr<RequestLog>(new RequestLog(file, owned, options, registry));
}

RequestLog::RequestLog(std::FILE* file, bool owned, Options options, Registry& registry)
    : file_(file), owned_(owned), options_(options) {
  written_total_ =
      &registry.counter("hengshi_request_log_written_total", "Request log lines written");
  dropped_total_ = &registry.counter("hengshi_request_log_dropped_total",
                                     "Request log lines dropped: queue full (slow or "
                                     "blocked log file) or the write failed");
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
  if (!file_) return;
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
  if (!file_) return true;
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
    bool ok = write_line(line);
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
