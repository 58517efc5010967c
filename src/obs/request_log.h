// RequestLog: one JSON object per line per request (DESIGN.md §4), enough to replay a request's
// routing and recalibrate: id, ts, session, task_type, route, reason, level, fallback_type, cache,
// latency, tokens, cost, models. Never the message text (PII stays out of logs).
//
// Off the request path: write() serializes the record and appends it to a bounded queue (default
// 10,000 lines); one writer thread drains the queue to the file. A blocked stdout or a full disk
// therefore never stalls a request: when the queue is full the record is dropped and counted
// (hengshi_request_log_dropped_total; hengshi_request_log_written_total counts lines written), and
// a line the file refuses (ENOSPC, EPIPE, ...) is dropped and counted the same way. The writer
// waits for the file with poll() in short steps and writes at most PIPE_BUF bytes per step, so it
// can always be stopped: destruction drains what is queued for at most flush_timeout, then gives up
// on the rest. Lines are written whole and in write() order.
//
// Thread-safety: write(), flush() and the counters may be called from any thread. The FILE* is only
// used for its descriptor (no stdio buffering), by the writer thread; an owned file is closed on
// destruction. Rotation (Options::rotate_*) happens on the writer thread between two lines.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "obs/metrics.h"

namespace hengshi::obs {

inline constexpr int kRequestLogSchemaVersion = 1;

class RequestLog {
 public:
  struct Options {
    std::size_t max_queued_lines = 10'000;           // more are dropped (and counted)
    std::chrono::milliseconds flush_timeout{5'000};  // flush() and destruction wait at most this
    std::chrono::milliseconds poll_step{50};         // how often a blocked writer checks for stop
    // Rotation, for a file opened by path (never stdout or a pipe): before a line that would take
    // the file over rotate_bytes, or once it is rotate_age old, FILE becomes FILE.1 (FILE.1 ->
    // FILE.2, ...; FILE.<keep> is deleted) and a fresh FILE is opened. 0 = not by that measure.
    std::int64_t rotate_bytes = 0;
    std::chrono::seconds rotate_age{0};
    int keep = 5;
  };

  // target: "-" = stdout, "" = disabled, else a file opened for append.
  static Result<std::unique_ptr<RequestLog>> open(const std::string& target);
  static Result<std::unique_ptr<RequestLog>> open(const std::string& target, Options options);
  // Writes to `file` (e.g. a pipe's write end in tests), closed on destruction when `owned`.
  static std::unique_ptr<RequestLog> to_file(std::FILE* file, bool owned, Options options,
                                             Registry& registry = Registry::global());
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  bool enabled() const { return enabled_; }
  // Never blocks on I/O: the line is queued, or dropped when the queue is full.
  void write(nlohmann::json record);
  // Waits until every line queued so far is written (or dropped), at most `timeout`; false when the
  // time ran out first.
  bool flush(std::chrono::milliseconds timeout);
  bool flush() { return flush(options_.flush_timeout); }

  // This log's own counts (the metrics above sum every log of the process).
  std::uint64_t written() const { return written_.load(std::memory_order_relaxed); }
  std::uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  std::uint64_t rotations() const { return rotations_.load(std::memory_order_relaxed); }

 private:
  RequestLog(std::FILE* file, bool owned, Options options, Registry& registry, std::string path,
             std::int64_t file_bytes);
  void run_writer();
  // Writes one line to the descriptor; false when the file refused it or stop came first.
  bool write_line(const std::string& line);
  void count_dropped(std::uint64_t lines);
  // Writer thread only: rotates the file first when `next_line` bytes are due to make it too big
  // or it is too old. A failed rename or reopen keeps writing to the file it has (logged once).
  void rotate_if_due(std::size_t next_line);

  const bool enabled_;
  std::FILE* file_ = nullptr;  // after construction, the writer thread's alone (rotation swaps it)
  bool owned_ = false;
  const std::string path_;  // set for a regular file opened by path: what rotation renames
  std::int64_t file_bytes_ = 0;                          // writer thread only
  std::chrono::steady_clock::time_point file_opened_;    // writer thread only
  bool rotation_failed_ = false;                         // writer thread only: warned once
  Options options_;
  Counter* written_total_ = nullptr;
  Counter* dropped_total_ = nullptr;
  Counter* rotations_total_ = nullptr;
  std::atomic<std::uint64_t> rotations_{0};
  std::atomic<std::uint64_t> written_{0};
  std::atomic<std::uint64_t> dropped_{0};

  std::mutex mutex_;
  std::condition_variable queued_;    // writer: a line arrived or stop was asked
  std::condition_variable drained_;   // flush(): the writer caught up
  std::deque<std::string> queue_;     // guarded by mutex_
  std::uint64_t enqueued_ = 0;        // lines accepted into the queue, guarded by mutex_
  std::uint64_t finished_ = 0;        // of those, written or dropped by the writer, guarded
  bool stopping_ = false;             // guarded by mutex_
  std::atomic<bool> abandon_{false};  // the writer gives up on a blocked line at once
  std::thread writer_;                // last: started when everything above is ready
};

}  // namespace hengshi::obs
