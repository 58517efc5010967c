#include "support/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace hengshi::testing {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Under scripts/test-sanitize a sanitizer report in a child's stderr is copied to
// $HENGSHI_SANITIZER_REPORT_DIR before the file is deleted: UBSan writes there even when
// ASAN_OPTIONS names a log_path, and the script fails the run on any file in that folder, so a
// report in a child fails it even when the test that started the child passed.
void keep_sanitizer_report(const std::string& stderr_path, pid_t pid) {
  const char* dir = std::getenv("HENGSHI_SANITIZER_REPORT_DIR");
  if (dir == nullptr || *dir == '\0') return;
  const std::string text = read_file(stderr_path);
  const bool report = text.find("runtime error:") != std::string::npos ||
                      text.find("Sanitizer:") != std::string::npos;
  if (!report) return;
  std::ofstream(std::string(dir) + "/child-stderr." + std::to_string(pid)) << text;
}

// The report the sanitizer runtime writes for `pid` (ASAN_OPTIONS / UBSAN_OPTIONS log_path is
// <dir>/<kind>, the runtime appends .<pid>), or "" when there is none.
std::string sanitizer_report_path(pid_t pid) {
  const char* dir = std::getenv("HENGSHI_SANITIZER_REPORT_DIR");
  if (dir == nullptr || *dir == '\0') return "";
  for (const char* kind : {"asan", "ubsan"}) {
    std::string path = std::string(dir) + "/" + kind + "." + std::to_string(pid);
    if (::access(path.c_str(), F_OK) == 0) return path;
  }
  return "";
}

// Names the test whose child wrote a report: the script prints reports after every test ran,
// when nothing else says where a child's report came from.
void tag_sanitizer_report(const std::string& path) {
  const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
  std::ofstream(path, std::ios::app) << "\n(a child of test "
                                     << (test ? std::string(test->test_suite_name()) + "." + test->name()
                                              : std::string("<none>"))
                                     << ")\n";
}

}  // namespace

std::string binary_path(const std::string& relative) {
  const char* dir = std::getenv("HENGSHI_BIN_DIR");
  if (!dir) throw std::runtime_error("HENGSHI_BIN_DIR is not set (run the tests through ctest)");
  return std::string(dir) + "/" + relative;
}

std::string temp_path(const std::string& name) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp ? tmp : "/tmp") + "/hengshi-test-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++) + "-" + name;
}

std::string source_path(const std::string& relative) {
  if (const char* dir = std::getenv("HENGSHI_SOURCE_DIR"); dir != nullptr && *dir != '\0') {
    return std::string(dir) + "/" + relative;
  }
  std::string here = __FILE__;  // <source>/tests/support/child_process.cc
  return here.substr(0, here.rfind("/tests/support/")) + "/" + relative;
}

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv, const std::string& stdin_path) {
  ChildProcess child;
  child.stdout_path_ = temp_path("stdout.txt");
  child.stderr_path_ = temp_path("stderr.txt");
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    int out = ::open(child.stdout_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = ::open(child.stderr_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = ::open(stdin_path.empty() ? "/dev/null" : stdin_path.c_str(), O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    ::setpgid(0, 0);
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  child.pid_ = pid;
  return child;
}

ChildProcess::Finished ChildProcess::run(const std::vector<std::string>& argv,
                                         std::chrono::milliseconds timeout, const std::string& stdin_path) {
  ChildProcess child = spawn(argv, stdin_path);
  Finished finished;
  finished.exit_code = child.wait(timeout);
  finished.output = child.output();
  finished.stdout_text = read_file(child.stdout_path_);
  return finished;  // the destructor kills a child still running
}

ChildProcess ChildProcess::launch(const std::vector<std::string>& argv) { return spawn(argv); }

ChildProcess ChildProcess::start(const std::vector<std::string>& argv,
                                 std::chrono::milliseconds ready_timeout) {
  ChildProcess child = spawn(argv);
  const pid_t pid = child.pid_;

  // Poll the child's output for the ready line: the child announces its port once it listens
  // (hengshi-sim on stdout; hengshi on stderr, where its logs go).
  static const std::regex ready(R"(listening on http://([^:\s]+|\[[^\]]+\]):(\d+)\r?\n)");
  const auto give_up = std::chrono::steady_clock::now() + ready_timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    std::smatch match;
    std::string text = read_file(child.stdout_path_) + "\x1f" + read_file(child.stderr_path_);
    if (std::regex_search(text, match, ready)) {
      child.host_ = match[1];
      child.port_ = std::stoi(match[2]);
      return child;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      child.reaped_ = true;
      throw std::runtime_error("process " + argv[0] + " exited before listening:\n" + child.output());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error("process " + argv[0] + " did not listen within the timeout:\n" + child.output());
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_),
      host_(std::move(other.host_)),
      port_(other.port_),
      stdout_path_(std::move(other.stdout_path_)),
      stderr_path_(std::move(other.stderr_path_)),
      reaped_(other.reaped_) {
  other.pid_ = -1;
}

ChildProcess::~ChildProcess() {
  const std::string report = pid_ > 0 ? sanitizer_report_path(pid_) : "";
  // A child writing a sanitizer report exits by itself once done (halt_on_error); symbolizing
  // takes seconds, and a SIGKILL meanwhile would leave only the report's first line.
  if (!report.empty() && !reaped_) (void)wait(std::chrono::seconds(60));
  if (!report.empty()) tag_sanitizer_report(report);
  if (pid_ > 0 && !reaped_) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  if (!stdout_path_.empty()) {
    keep_sanitizer_report(stderr_path_, pid_);
    ::unlink(stdout_path_.c_str());
    ::unlink(stderr_path_.c_str());
  }
}

void ChildProcess::signal(int signal_number) const {
  if (pid_ > 0) ::kill(pid_, signal_number);
}

bool ChildProcess::running() {
  if (pid_ <= 0 || reaped_) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    reaped_ = true;
    return false;
  }
  return true;
}

std::optional<int> ChildProcess::wait(std::chrono::milliseconds timeout) {
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    int status = 0;
    pid_t done = ::waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return std::nullopt;
}

int ChildProcess::admin_port() {
  if (admin_port_ != 0) return admin_port_;
  static const std::regex admin(R"(admin listening on http://([^:\s]+|\[[^\]]+\]):(\d+)\r?\n)");
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    std::smatch match;
    std::string text = read_file(stdout_path_) + "\x1f" + read_file(stderr_path_);
    if (std::regex_search(text, match, admin)) {
      admin_port_ = std::stoi(match[2]);
      return admin_port_;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  throw std::runtime_error("no admin listener line from pid " + std::to_string(pid_) + ":\n" + output());
}

std::string ChildProcess::stdout_text() const { return read_file(stdout_path_); }

std::string ChildProcess::output() const {
  return "--- stdout ---\n" + read_file(stdout_path_) + "--- stderr ---\n" + read_file(stderr_path_);
}

}  // namespace hengshi::testing
