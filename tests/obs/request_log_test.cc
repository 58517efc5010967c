#include "obs/request_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>


namespace hengshi::obs {
namespace {

using namespace std::chrono_literals;

// A pipe whose write end the log writes to; nobody reads it until drain() is called.
class Pipe {
 public:
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    read_fd_ = fds[0];
    write_file_ = ::fdopen(fds[1], "w");
  }
  ~Pipe() {
    if (reader_.joinable()) reader_.join();
    if (read_fd_ >= 0) ::close(read_fd_);
  }
  std::FILE* write_end() const { return write_file_; }
  // Starts reading everything until the write end closes.
  void drain() {
    reader_ = std::thread([this] {
      char buffer[65536];
      for (;;) {
        ssize_t n = ::read(read_fd_, buffer, sizeof buffer);
        if (n <= 0) break;
        std::lock_guard lock(mutex_);
        text_.append(buffer, static_cast<std::size_t>(n));
      }
    });
  }
  // Returns once the reader has seen the write end close: everything written is in text().
  void wait_for_eof() {
    if (reader_.joinable()) reader_.join();
  }
  std::string text() {
    std::lock_guard lock(mutex_);
    return text_;
  }
  void close_read_end() {
    ::close(read_fd_);
    read_fd_ = -1;
  }

 private:
  int read_fd_ = -1;
  std::FILE* write_file_ = nullptr;
  std::thread reader_;
  std::mutex mutex_;
  std::string text_;
};

nlohmann::json record(int seq, std::size_t padding = 200) {
  return {
      {"id", "req-" + std::to_string(seq)}, {"seq", seq}, {"padding", std::string(padding, 'p')}};
}

std::vector<int> sequence_numbers(const std::string& text) {
  std::vector<int> seqs;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) seqs.push_back(nlohmann::json::parse(line)["seq"].get<int>());
  return seqs;
}

RequestLog::Options small_options() {
  RequestLog::Options options;
  options.max_queued_lines = 100;
  options.flush_timeout = 200ms;
  options.poll_step = 10ms;
  return options;
}

// Runs `writes` on its own thread and reports whether it finished within `limit`; if not, the
// caller drains the pipe so the thread can end (a blocking log would otherwise hang the test).
bool finishes_within(std::chrono::milliseconds limit, const std::function<void()>& writes,
                     Pipe& pipe) {
  auto done = std::async(std::launch::async, writes);
  bool in_time = done.wait_for(limit) == std::future_status::ready;
  if (!in_time) pipe.drain();
  done.wait();
  return in_time;
}

TEST(RequestLogTest, ABlockedReaderNeverBlocksWriteAndDropsAreCounted) {
  Pipe pipe;
  Registry registry;
  auto log = RequestLog::to_file(pipe.write_end(), /*owned=*/true, small_options(), registry);
  constexpr int kRecords = 5000;  // ~1.2 MB: far more than a pipe (64 KiB) and the queue hold
  auto started = std::chrono::steady_clock::now();
  bool in_time = finishes_within(
      10s,
      [&] {
        for (int i = 0; i < kRecords; ++i) log->write(record(i));
      },
      pipe);
  ASSERT_TRUE(in_time) << "write() blocked on a reader that does not read";
  EXPECT_LT(std::chrono::steady_clock::now() - started, 5s);
  EXPECT_GT(log->dropped(), 0u);
  EXPECT_FALSE(log->flush(50ms));  // the reader still reads nothing
  EXPECT_EQ(registry.counter("hengshi_request_log_dropped_total", "").value(),
            static_cast<double>(log->dropped()));

  // The reader wakes up: what was queued arrives, in order, and every record is accounted for.
  pipe.drain();
  ASSERT_TRUE(log->flush(5s));
  EXPECT_EQ(log->written() + log->dropped(), static_cast<std::uint64_t>(kRecords));
  EXPECT_EQ(registry.counter("hengshi_request_log_written_total", "").value(),
            static_cast<double>(log->written()));
  std::uint64_t written = log->written();
  log.reset();  // closes the write end: the reader sees EOF
  // Not "the text ends with a newline": that also holds between two reads of the pipe.
  pipe.wait_for_eof();
  auto seqs = sequence_numbers(pipe.text());
  EXPECT_EQ(seqs.size(), written);
  for (std::size_t i = 1; i < seqs.size(); ++i) EXPECT_LT(seqs[i - 1], seqs[i]) << i;
  ASSERT_FALSE(seqs.empty());
  EXPECT_EQ(seqs.front(), 0);  // the first records are the ones kept
}

TEST(RequestLogTest, DestructionWithABlockedWriterEndsInBoundedTime) {
  Pipe pipe;
  Registry registry;
  auto log = RequestLog::to_file(pipe.write_end(), /*owned=*/true, small_options(), registry);
  // 4 KB records: the pipe (64 KiB) is full after a few, the queue holds 100 more.
  for (int i = 0; i < 1000; ++i) log->write(record(i, 4000));
  EXPECT_FALSE(log->flush(20ms));  // the writer is stuck
  auto started = std::chrono::steady_clock::now();
  bool in_time = finishes_within(
      5s, [&] { log.reset(); }, pipe);
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(in_time) << "destruction waited for a reader that never reads";
  EXPECT_GE(took, 200ms);  // flush_timeout: the queue had its chance
  EXPECT_LT(took, 3s);
  EXPECT_GT(registry.counter("hengshi_request_log_dropped_total", "").value(), 900.0);
  pipe.close_read_end();
}

TEST(RequestLogTest, AFailingFileDropsAndCountsInsteadOfKillingTheProcess) {
  Pipe pipe;
  pipe.close_read_end();  // writes now fail with EPIPE (and would raise SIGPIPE)
  Registry registry;
  auto log = RequestLog::to_file(pipe.write_end(), /*owned=*/true, small_options(), registry);
  for (int i = 0; i < 10; ++i) log->write(record(i));
  EXPECT_TRUE(log->flush(5s));
  EXPECT_EQ(log->dropped(), 10u);
  EXPECT_EQ(log->written(), 0u);
}

TEST(RequestLogTest, FileTargetGetsEveryRecordInOrderWithSchemaAndTimestamp) {
  std::string path = ::testing::TempDir() + "/hengshi_request_log_test.jsonl";
  std::remove(path.c_str());
  {
    auto log = RequestLog::open(path);
    ASSERT_TRUE(log.ok()) << log.error().message;
    ASSERT_TRUE((*log)->enabled());
    for (int i = 0; i < 50; ++i) (*log)->write(record(i));
    EXPECT_TRUE((*log)->flush());
    EXPECT_EQ((*log)->written(), 50u);
  }
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto seqs = sequence_numbers(text.str());
  ASSERT_EQ(seqs.size(), 50u);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(seqs[static_cast<std::size_t>(i)], i);
  auto first = nlohmann::json::parse(text.str().substr(0, text.str().find('\n')));
  EXPECT_EQ(first["schema"], kRequestLogSchemaVersion);
  EXPECT_TRUE(first["ts"].is_number_integer());
  std::remove(path.c_str());
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(RequestLogTest, RotationBySizeKeepsNFilesAndLosesNoLineInBetween) {
  const std::string path = ::testing::TempDir() + "/hengshi_request_log_rotation.jsonl";
  for (const char* suffix : {"", ".1", ".2", ".3", ".4"}) std::remove((path + suffix).c_str());
  RequestLog::Options options;
  options.rotate_bytes = 400;  // a few lines per file
  options.keep = 2;
  std::uint64_t rotations = 0;
  {
    auto log = RequestLog::open(path, options);
    ASSERT_TRUE(log.ok()) << log.error().message;
    for (int i = 0; i < 40; ++i) (*log)->write(record(i, 50));
    EXPECT_TRUE((*log)->flush());
    EXPECT_EQ((*log)->written(), 40u);
    rotations = (*log)->rotations();
  }
  EXPECT_GE(rotations, 3u);
  // Oldest first: FILE.2, FILE.1, FILE hold the newest lines in order, each under the bound.
  std::vector<int> seqs;
  for (const char* suffix : {".2", ".1", ""}) {
    const std::string text = read_text(path + suffix);
    ASSERT_FALSE(text.empty()) << suffix;
    EXPECT_LE(text.size(), 400u) << suffix;
    for (int seq : sequence_numbers(text)) seqs.push_back(seq);
  }
  EXPECT_FALSE(std::ifstream(path + ".3").good()) << "keep: 2 rotated files, no more";
  ASSERT_FALSE(seqs.empty());
  for (std::size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], 40 - static_cast<int>(seqs.size()) + static_cast<int>(i));
  EXPECT_EQ(seqs.back(), 39);
  for (const char* suffix : {"", ".1", ".2"}) std::remove((path + suffix).c_str());
}

TEST(RequestLogTest, RotationByAgeStartsAFreshFileForTheNextLine) {
  const std::string path = ::testing::TempDir() + "/hengshi_request_log_age.jsonl";
  for (const char* suffix : {"", ".1", ".2"}) std::remove((path + suffix).c_str());
  RequestLog::Options options;
  options.rotate_age = std::chrono::seconds(1);
  {
    // An age of 0 s would rotate before every line; 1 s with a file that was opened earlier is
    // checked against the steady clock, so the test waits for the clock, not a sleep guess.
    auto log = RequestLog::open(path, options);
    ASSERT_TRUE(log.ok());
    (*log)->write(record(0));
    EXPECT_TRUE((*log)->flush());
    const auto opened = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - opened < 1100ms) std::this_thread::yield();
    (*log)->write(record(1));
    EXPECT_TRUE((*log)->flush());
    EXPECT_EQ((*log)->rotations(), 1u);
  }
  EXPECT_EQ(sequence_numbers(read_text(path + ".1")), std::vector<int>{0});
  EXPECT_EQ(sequence_numbers(read_text(path)), std::vector<int>{1});
  for (const char* suffix : {"", ".1"}) std::remove((path + suffix).c_str());
}

TEST(RequestLogTest, DisabledLogAcceptsWritesAndFlushes) {
  auto log = RequestLog::open("");
  ASSERT_TRUE(log.ok());
  EXPECT_FALSE((*log)->enabled());
  (*log)->write(record(1));
  EXPECT_TRUE((*log)->flush());
}

TEST(RequestLogTest, InvalidUtf8InARecordIsReplacedNotThrown) {
  Pipe pipe;
  pipe.drain();
  Registry registry;
  auto log = RequestLog::to_file(pipe.write_end(), /*owned=*/true, small_options(), registry);
  log->write({{"seq", 0}, {"model", std::string("bad \xC3")}});
  EXPECT_TRUE(log->flush(5s));
  log.reset();
  pipe.wait_for_eof();
  EXPECT_NE(pipe.text().find("\"seq\":0"), std::string::npos);
}

}  // namespace
}  // namespace hengshi::obs
