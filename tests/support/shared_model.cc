#include "support/shared_model.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "support/child_process.h"

namespace hengshi::testing {
namespace {

namespace fs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What decides whether a cached model is still the one these arguments would train: the
// arguments (a file's path only with path_and_content), the content of every argument that names
// a file, and the binary's size and mtime.
std::string fingerprint(const std::string& binary, const std::vector<std::string>& args, FileArguments files) {
  std::string material;
  for (const auto& arg : args) {
    std::error_code ec;
    const bool file = fs::is_regular_file(arg, ec);
    if (!file || files == FileArguments::path_and_content) material += arg + '\x1f';
    if (file) material += read_all(arg) + '\x1f';
  }
  struct stat info {};
  if (::stat(binary.c_str(), &info) == 0) {
    material += std::to_string(info.st_size) + ':' + std::to_string(info.st_mtim.tv_sec) + '.' +
                std::to_string(info.st_mtim.tv_nsec);
  }
  std::ostringstream hex;
  hex << std::hex << std::hash<std::string>{}(material);
  return hex.str();
}

// An exclusive flock on `path` for the scope (blocks while another process holds it).
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) {
      ::flock(fd_, LOCK_UN);
      ::close(fd_);
    }
  }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

SharedModel shared_trained_model(const std::string& name, const std::vector<std::string>& args,
                                 FileArguments files) {
  const std::string binary = binary_path("src/cli/hengshi");
  const fs::path root = fs::path(binary_path("test-fixtures"));
  std::error_code ec;
  fs::create_directories(root, ec);
  const fs::path dir = root / (name + "-" + fingerprint(binary, args, files));
  const std::string output_file = dir.string() + ".output";
  const std::string ok_file = dir.string() + ".ok";
  FileLock lock((root / (name + ".lock")).string());
  if (fs::exists(ok_file) && fs::exists(dir)) return {dir.string(), read_all(output_file), true};

  // Train into a fresh folder next to the final one, then move it in place.
  const fs::path staging = dir.string() + ".staging";
  fs::remove_all(staging, ec);
  fs::remove_all(dir, ec);
  std::vector<std::string> argv = {binary};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--out", staging.string()});
  auto trained = ChildProcess::run(argv, std::chrono::seconds(600));
  std::ofstream(output_file) << trained.output;
  if (trained.exit_code != 0) return {"", trained.output, false};
  fs::rename(staging, dir, ec);
  if (ec) return {"", trained.output + "\n(moving the model into place failed: " + ec.message() + ")", false};
  std::ofstream(ok_file) << "ok\n";
  return {dir.string(), trained.output, true};
}

SharedModel shared_demo_intent_model() {
  return shared_trained_model("demo-intent",
                              {"train", "--data", source_path("data/demo_faq.jsonl"), "--search-budget", "0"});
}

SharedModel shared_small_intent_model() {
  return shared_trained_model(
      "small-intent",
      {"train", "--data", source_path("tests/edge/fixtures/intent_small.jsonl"), "--search-budget", "0"});
}

}  // namespace hengshi::testing
