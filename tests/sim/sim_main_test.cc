// Runs the real hengshi-sim binary: the listening line, serving, exit codes, signals.
// The binary is found through HENGSHI_BIN_DIR (set by ctest) or next to this test's build dir;
// the tests skip when it has not been built.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace hengshi::sim {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::string sim_binary() {
  fs::path dir;
  if (const char* bin_dir = std::getenv("HENGSHI_BIN_DIR")) {
    dir = bin_dir;
  } else {
    dir = fs::read_symlink("/proc/self/exe").parent_path().parent_path();  // <build>/tests/..
  }
  return (dir / "tools" / "sim" / "hengshi-sim").string();
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // the child's stdout
  int err = -1;  // the child's stderr

  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
    if (err >= 0) close(err);
  }

  // Waits for the exit status, at most `limit`; a child still running is killed (-1).
  int wait_exit(std::chrono::seconds limit) {
    pid_t waited = pid;
    auto status = std::async(std::launch::async, [waited] {
      int raw = 0;
      waitpid(waited, &raw, 0);
      return raw;
    });
    if (status.wait_for(limit) != std::future_status::ready) kill(pid, SIGKILL);
    int raw = status.get();
    pid = -1;
    return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  }
};

std::unique_ptr<Child> spawn(const std::vector<std::string>& args) {
  int out_pipe[2];
  int err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) return nullptr;
  std::vector<char*> argv;
  std::string binary = sim_binary();
  argv.push_back(binary.data());
  std::vector<std::string> copies = args;
  for (auto& arg : copies) argv.push_back(arg.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    close(out_pipe[0]);
    close(err_pipe[0]);
    execv(binary.c_str(), argv.data());
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  auto child = std::make_unique<Child>();
  child->pid = pid;
  child->out = out_pipe[0];
  child->err = err_pipe[0];
  return child;
}

// Reads from `fd` until `stop_at` is seen, EOF, or `limit` passes.
std::string read_until(int fd, char stop_at, milliseconds limit) {
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(left.count())) <= 0) break;
    char byte = 0;
    if (read(fd, &byte, 1) != 1) break;
    if (byte == stop_at) break;
    text += byte;
  }
  return text;
}

// One HTTP/1.1 exchange with Connection: close over a plain socket; the raw response.
std::string raw_http(int port, const std::string& method, const std::string& target,
                     const std::string& body = {}) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval limit{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &address.sin_addr);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    std::string request = method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
                          "Connection: close\r\nContent-Type: application/json\r\n" +
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
        static_cast<ssize_t>(request.size())) {
      char chunk[4096];
      ssize_t got = 0;
      while ((got = recv(fd, chunk, sizeof(chunk), 0)) > 0) {
        response.append(chunk, static_cast<std::size_t>(got));
      }
    }
  }
  close(fd);
  return response;
}

class SimMainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(sim_binary())) GTEST_SKIP() << sim_binary() << " is not built";
  }

  // Starts the simulator on a free port and returns the port from its listening line.
  int start(std::vector<std::string> args) {
    args.insert(args.begin(), {"--listen", "127.0.0.1:0"});
    child_ = spawn(args);
    if (!child_) return -1;
    std::string line = read_until(child_->out, '\n', milliseconds(10'000));
    std::smatch match;
    static const std::regex kLine(R"(hengshi-sim listening on http://127\.0\.0\.1:(\d+))");
    if (!std::regex_match(line, match, kLine)) {
      ADD_FAILURE() << "unexpected first line: '" << line << "'";
      return -1;
    }
    return std::stoi(match[1]);
  }

  std::unique_ptr<Child> child_;
};

TEST_F(SimMainTest, PrintsListeningLineServesAndExitsZeroOnSigterm) {
  int port = start({"--name", "pool-b", "--seed", "3"});
  ASSERT_GT(port, 0);
  EXPECT_NE(raw_http(port, "GET", "/healthz").find("200 OK"), std::string::npos);
  std::string reply = raw_http(port, "POST", "/v1/chat/completions",
                               R"({"model":"m9","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_NE(reply.find("X-Sim-Name: pool-b"), std::string::npos) << reply;
  EXPECT_NE(reply.find(R"("sim":{"model":"m9","name":"pool-b")"), std::string::npos) << reply;
  kill(child_->pid, SIGTERM);
  EXPECT_EQ(child_->wait_exit(std::chrono::seconds(5)), 0);
}

TEST_F(SimMainTest, LoadsAProfileFileAndExitsZeroOnSigint) {
  std::string path = ::testing::TempDir() + "/sim_main_test_profile.yaml";
  std::ofstream(path) << "models:\n  broken: {error_rate: 1.0}\n";
  int port = start({"--profile", path, "--threads", "2"});
  ASSERT_GT(port, 0);
  EXPECT_NE(raw_http(port, "POST", "/v1/chat/completions",
                     R"({"model":"broken","messages":[{"role":"user","content":"x"}]})")
                .find("500 Internal Server Error"),
            std::string::npos);
  EXPECT_NE(raw_http(port, "POST", "/v1/chat/completions",
                     R"({"model":"fine","messages":[{"role":"user","content":"x"}]})")
                .find("200 OK"),
            std::string::npos);
  kill(child_->pid, SIGINT);
  EXPECT_EQ(child_->wait_exit(std::chrono::seconds(5)), 0);
}

TEST_F(SimMainTest, BadProfileExitsTwoNamingFileAndField) {
  std::string path = ::testing::TempDir() + "/sim_main_test_bad.yaml";
  std::ofstream(path) << "error_rate: 0.5\nhang_rat: 0.1\n";
  child_ = spawn({"--listen", "127.0.0.1:0", "--profile", path});
  ASSERT_TRUE(child_);
  std::string message = read_until(child_->err, '\n', milliseconds(10'000));
  EXPECT_NE(message.find(path + ": hang_rat: unknown field"), std::string::npos) << message;
  EXPECT_EQ(child_->wait_exit(std::chrono::seconds(5)), 2);
}

TEST_F(SimMainTest, BadListenExitsTwo) {
  child_ = spawn({"--listen", "127.0.0.1:99999"});
  ASSERT_TRUE(child_);
  std::string message = read_until(child_->err, '\n', milliseconds(10'000));
  EXPECT_NE(message.find("--listen"), std::string::npos) << message;
  EXPECT_EQ(child_->wait_exit(std::chrono::seconds(5)), 2);
}

}  // namespace
}  // namespace hengshi::sim
