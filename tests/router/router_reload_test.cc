#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "router/complexity_trainer.h"
#include "router/router.h"
#include "support/wait_until.h"

namespace hengshi::router {
namespace {

using ::testing::HasSubstr;

// Two policies that route the same inputs differently.
//   "zebra crossing":   A → human,           B → cloud-large (sensitive rule target)
//   intent at 0.7:      A → cloud-small,     B → edge        (default band)
constexpr const char* kPolicyA =
    "sensitive:\n"
    "  - {name: zebra, keywords: [zebra], target: human}\n"
    "confidence:\n"
    "  default_band: {high: 0.9, low: 0.2}\n";
constexpr const char* kPolicyB =
    "sensitive:\n"
    "  - {name: zebra, keywords: [zebra], target: cloud-large}\n"
    "confidence:\n"
    "  default_band: {high: 0.5, low: 0.1}\n";
constexpr const char* kBroken = "confidence:\n  default_band: {high: 0.1, low: 0.9}\n";

std::string version_of(const char* yaml) {
  auto policy = parse_router_policy(yaml, "any", "");
  EXPECT_TRUE(policy.ok());
  return policy.ok() ? (*policy)->version : "";
}

class RouterReloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("hengshi_router_reload_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    path_ = (dir_ / "policy.yaml").string();
    // Every reload logs a line; the tests check the returned values instead.
    log_level_ = spdlog::default_logger()->level();
    spdlog::set_level(spdlog::level::off);
  }
  void TearDown() override {
    spdlog::set_level(log_level_);
    std::filesystem::remove_all(dir_);
  }

  void write_policy(const std::string& text) { std::ofstream(path_, std::ios::trunc) << text; }

  // Moves the file's modification time on by `seconds` from what it is now, so a rewrite within
  // the same second is still seen as a change.
  void bump_mtime(int seconds = 2) {
    std::filesystem::last_write_time(
        path_, std::filesystem::last_write_time(path_) + std::chrono::seconds(seconds));
  }

  std::unique_ptr<Router> make_router(const std::string& text) {
    write_policy(text);
    Config config = default_config();
    config.routing.policy_file = path_;
    auto router = Router::create(config);
    EXPECT_TRUE(router.ok()) << (router.ok() ? "" : router.error().message);
    return router.ok() ? std::move(*router) : nullptr;
  }

  std::filesystem::path dir_;
  std::string path_;
  spdlog::level::level_enum log_level_ = spdlog::level::info;
};

TEST_F(RouterReloadTest, CreateLoadsThePolicyFile) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->policy()->version, version_of(kPolicyA));
  EXPECT_EQ(router->policy()->source, path_);
  EXPECT_EQ(router->policy_file(), path_);
}

TEST_F(RouterReloadTest, CreateRefusesABrokenOrMissingFile) {
  write_policy(kBroken);
  Config config = default_config();
  config.routing.policy_file = path_;
  auto broken = Router::create(config);
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.error().message, HasSubstr(path_ + ": confidence.default_band"));

  config.routing.policy_file = (dir_ / "missing.yaml").string();
  auto missing = Router::create(config);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr(config.routing.policy_file));
}

TEST_F(RouterReloadTest, ReloadSwapsToTheNewFile) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  const auto held = router->policy();
  write_policy(kPolicyB);
  auto reloaded = router->reload("test");
  ASSERT_TRUE(reloaded.ok()) << reloaded.error().message;
  EXPECT_EQ(*reloaded, version_of(kPolicyB));
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));
  // A snapshot taken before the swap is still whole and still A.
  EXPECT_EQ(held->version, version_of(kPolicyA));
  EXPECT_EQ(held->sensitive.match("zebra")->target, "human");
}

TEST_F(RouterReloadTest, BrokenFileIsRefusedAndTheOldPolicyKeepsRunning) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  const auto before = router->policy();
  for (const std::string& broken :
       {std::string(kBroken), std::string("sensitive: [oops\n"), std::string("bogus: 1\n")}) {
    SCOPED_TRACE(broken);
    write_policy(broken);
    auto reloaded = router->reload("test");
    ASSERT_FALSE(reloaded.ok());
    EXPECT_EQ(reloaded.error().code, "config_invalid");
    EXPECT_THAT(reloaded.error().message, HasSubstr(path_));
    EXPECT_EQ(router->policy(), before);  // the very same snapshot
  }
  std::filesystem::remove(path_);
  auto missing = router->reload("test");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, "config_unreadable");
  EXPECT_EQ(router->policy(), before);

  write_policy(kPolicyB);  // a fixed file is picked up again
  ASSERT_TRUE(router->reload("test").ok());
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));
}

// The watcher loads a changed file on the second tick that finds it unchanged since the first.
void two_ticks(Router& router) {
  EXPECT_FALSE(router.reload_if_changed()) << "loaded on the first tick that saw the change";
  EXPECT_TRUE(router.reload_if_changed()) << "a settled change was not loaded";
}

TEST_F(RouterReloadTest, ReloadIfChangedFollowsSizeAndModificationTime) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  const auto loaded_time = std::filesystem::last_write_time(path_);

  // Untouched: nothing happens.
  EXPECT_FALSE(router->reload_if_changed());
  EXPECT_FALSE(router->reload_if_changed());
  EXPECT_EQ(router->policy()->version, version_of(kPolicyA));

  // New content of another size but the old time: the size gives it away.
  write_policy(kPolicyB);
  std::filesystem::last_write_time(path_, loaded_time);
  two_ticks(*router);
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));

  // A broken rewrite is refused; the running policy stays.
  write_policy(kBroken);
  bump_mtime(4);
  two_ticks(*router);
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));
  EXPECT_FALSE(router->reload_if_changed());  // reported once, not on every tick

  // Then fixed: picked up again.
  write_policy(kPolicyA);
  bump_mtime(6);
  two_ticks(*router);
  EXPECT_EQ(router->policy()->version, version_of(kPolicyA));
}

TEST_F(RouterReloadTest, AFileWrittenInTwoStepsIsNotLoadedBetweenTheSteps) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  const std::string full = kPolicyB;
  const std::size_t half = full.find("confidence:");  // the first half parses on its own too
  ASSERT_NE(half, std::string::npos);

  // Step one: the first half is on disk; a tick sees the change but does not load it.
  write_policy(full.substr(0, half));
  bump_mtime(2);
  EXPECT_FALSE(router->reload_if_changed());
  EXPECT_EQ(router->policy()->version, version_of(kPolicyA));

  // Step two: the writer appends the rest before the next tick: still moving, still not loaded.
  std::ofstream(path_, std::ios::app) << full.substr(half);
  bump_mtime(4);
  EXPECT_FALSE(router->reload_if_changed());
  EXPECT_EQ(router->policy()->version, version_of(kPolicyA));

  // Settled: the whole file is loaded — never the half.
  EXPECT_TRUE(router->reload_if_changed());
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));
  EXPECT_NE(router->policy()->version, version_of(full.substr(0, half).c_str()));
}

// POST /admin/reload runs on an I/O thread: the reload must not block it. The policy file is
// a FIFO, so reading it blocks until the test writes it: the I/O thread must keep serving
// other work meanwhile, and the result comes back on that thread.
TEST_F(RouterReloadTest, ReloadAsyncRunsOffTheCallingThreadAndResumesOnIt) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  std::filesystem::remove(path_);
  ASSERT_EQ(::mkfifo(path_.c_str(), 0600), 0);

  asio::io_context io;
  std::atomic<bool> completed{false};
  std::atomic<bool> other_work_ran{false};
  std::optional<Result<std::string>> result;
  std::thread::id resumed_on;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        auto reloaded = co_await router->reload_async("admin");
        result.emplace(std::move(reloaded));
        resumed_on = std::this_thread::get_id();
        completed = true;
      },
      asio::detached);
  asio::post(io, [&] { other_work_ran = true; });
  std::thread io_thread([&] { io.run(); });
  const std::thread::id io_id = io_thread.get_id();

  // The reload is stuck opening the FIFO, yet the I/O thread ran the other handler.
  bool io_was_free = hengshi::testing::wait_until([&] { return other_work_ran.load(); });
  EXPECT_TRUE(io_was_free) << "reload_async blocked the calling thread";
  EXPECT_FALSE(completed.load());

  std::ofstream(path_) << kPolicyB;  // unblocks the reader on the reload thread
  EXPECT_TRUE(hengshi::testing::wait_until([&] { return completed.load(); }));
  io_thread.join();  // io.run() returns once the coroutine is done: no work left
  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(result->ok()) << result->error().message;
  EXPECT_EQ(**result, version_of(kPolicyB));
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));
  EXPECT_EQ(resumed_on, io_id);
}

TEST_F(RouterReloadTest, WatchTickCanRunOnTheReloadThread) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  write_policy(kPolicyB);
  bump_mtime();
  asio::io_context io;
  std::vector<bool> ticks;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        for (int i = 0; i < 3; ++i) ticks.push_back(co_await router->reload_if_changed_async());
      },
      asio::detached);
  io.run();
  EXPECT_EQ(ticks, (std::vector<bool>{false, true, false}));  // seen, settled + loaded, quiet
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));
}

TEST_F(RouterReloadTest, ReloadAsyncReportsARefusedFile) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  write_policy(kBroken);
  asio::io_context io;
  std::optional<Result<std::string>> result;
  asio::co_spawn(
      io, [&]() -> awaitable<void> { result.emplace(co_await router->reload_async("admin")); },
      asio::detached);
  io.run();  // returns once the result is back: the pending reload keeps the context running
  ASSERT_TRUE(result.has_value());
  ASSERT_FALSE(result->ok());
  EXPECT_THAT(result->error().message, HasSubstr("confidence.default_band"));
  EXPECT_EQ(router->policy()->version, version_of(kPolicyA));
}

TEST_F(RouterReloadTest, ThresholdsFileChangeIsAReloadToo) {
  ThresholdsFile file;
  file.version = "thr-reload-1";
  const std::string thresholds = (dir_ / "thresholds.json").string();
  ASSERT_TRUE(write_thresholds_file(file, thresholds).ok());
  write_policy(kPolicyA);
  Config config = default_config();
  config.routing.policy_file = path_;
  config.routing.thresholds_file = thresholds;
  auto created = Router::create(config);
  ASSERT_TRUE(created.ok()) << created.error().message;
  Router& router = **created;
  EXPECT_THAT(router.policy()->version, HasSubstr("+thr-reload-1"));

  const auto policy_time = std::filesystem::last_write_time(path_);
  file.version = "thr-reload-2";
  ASSERT_TRUE(write_thresholds_file(file, thresholds).ok());
  std::filesystem::last_write_time(thresholds, policy_time + std::chrono::seconds(3));
  two_ticks(router);
  EXPECT_THAT(router.policy()->version, HasSubstr("+thr-reload-2"));
}

// A retrained complexity model (a new manifest.json in routing.complexity_model) is a reload;
// a broken one is refused and the running model stays.
TEST_F(RouterReloadTest, ComplexityModelChangeIsAReloadToo) {
  const std::filesystem::path rows = dir_ / "complexity_rows.jsonl";
  {
    std::ofstream out(rows);
    for (int i = 0; i < 20; ++i) {
      out << R"({"text": "Compute 3^)" << i << R"( mod 7 and prove it. A. 1 B. 2", "small_correct": false})" "\n"
          << R"({"text": "opening hours )" << i << R"(?", "small_correct": true})" "\n";
    }
  }
  const std::filesystem::path model_dir = dir_ / "complexity";
  ComplexityTrainOptions options;
  options.large_share = 0.5;
  ASSERT_TRUE(train_complexity_directory(rows.string(), model_dir, options).ok());
  write_policy(kPolicyA);
  Config config = default_config();
  config.routing.policy_file = path_;
  config.routing.complexity_model = model_dir.string();
  auto created = Router::create(config);
  ASSERT_TRUE(created.ok()) << created.error().message;
  Router& router = **created;
  ASSERT_NE(router.policy()->complexity_model, nullptr);
  EXPECT_DOUBLE_EQ(router.policy()->complexity_model->large_share(), 0.5);

  options.large_share = 0.25;
  ASSERT_TRUE(train_complexity_directory(rows.string(), model_dir, options).ok());
  std::filesystem::last_write_time(model_dir / "manifest.json",
                                   std::filesystem::last_write_time(path_) + std::chrono::seconds(3));
  two_ticks(router);
  EXPECT_DOUBLE_EQ(router.policy()->complexity_model->large_share(), 0.25);
  EXPECT_THAT(router.policy()->version, HasSubstr("+cx-"));

  std::ofstream(model_dir / "weights.json", std::ios::app) << " ";  // no longer its manifest's
  EXPECT_FALSE(router.reload("test").ok());
  EXPECT_DOUBLE_EQ(router.policy()->complexity_model->large_share(), 0.25);
}

// What a version implies for the two fixed inputs.
struct Expected {
  std::string zebra_route;
  std::string intent_route;
};

// Decisions run on four threads while a fifth swaps the policy back and forth: every decision
// must be exactly what the snapshot it was given implies — never half of A and half of B.
TEST_F(RouterReloadTest, HotReloadUnderConcurrentTraffic) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  const std::map<std::string, Expected> expected = {
      {version_of(kPolicyA), {"human", "cloud-small"}},
      {version_of(kPolicyB), {"cloud-large", "edge"}},
  };
  ASSERT_EQ(expected.size(), 2u);

  const std::string zebra_text = "is the zebra crossing open?";
  const std::string intent_text = "when do you open?";
  edge::IntentPrediction prediction;
  prediction.intent = "opening_hours";
  prediction.answer = "9 to 5.";
  prediction.confidence = 0.7;
  prediction.is_oos = false;
  const auto make_input = [&](const std::string& text) {
    RouteInput input;
    input.texts = {text};
    input.last_user_text = text;
    input.task_type = "faq";
    input.prediction = &prediction;
    input.pools = {"cloud-small", "cloud-large"};
    return input;
  };
  const RouteInput zebra = make_input(zebra_text);
  const RouteInput intent = make_input(intent_text);

  constexpr int kReloads = 200;
  constexpr int kDeciders = 4;
  std::atomic<bool> done{false};
  std::atomic<long> decisions{0};
  std::atomic<long> mismatches{0};
  std::mutex seen_mutex;
  std::set<std::string> seen_versions;
  std::string first_mismatch;

  std::vector<std::thread> deciders;
  for (int t = 0; t < kDeciders; ++t) {
    deciders.emplace_back([&, t] {
      std::set<std::string> seen;
      for (long i = t; !done.load(std::memory_order_acquire); ++i) {
        const bool is_zebra = i % 2 == 0;
        auto policy = router->policy();
        const Decision decision = router->decide(is_zebra ? zebra : intent, *policy);
        seen.insert(policy->version);
        const auto want = expected.find(policy->version);
        const std::string got_version = decision.figures.value("policy", "");
        const bool ok =
            want != expected.end() && got_version == policy->version &&
            to_string(decision.route) == (is_zebra ? want->second.zebra_route : want->second.intent_route);
        if (!ok && mismatches.fetch_add(1) == 0) {
          std::lock_guard lock(seen_mutex);
          first_mismatch = policy->version + " → " + std::string(to_string(decision.route)) + " " + std::string(to_string(decision.reason)) + " " +
                           decision.figures.dump();
        }
        decisions.fetch_add(1, std::memory_order_release);
      }
      std::lock_guard lock(seen_mutex);
      seen_versions.insert(seen.begin(), seen.end());
    });
  }

  const std::string version_a = version_of(kPolicyA), version_b = version_of(kPolicyB);
  std::thread reloader([&] {
    for (int i = 0; i < kReloads; ++i) {
      const bool to_b = i % 2 == 0;
      write_policy(to_b ? kPolicyB : kPolicyA);
      auto reloaded = router->reload("test");
      if (!reloaded.ok() || *reloaded != (to_b ? version_b : version_a)) mismatches.fetch_add(1);
      // Let the deciders make some progress on this version before the next swap (no sleeps:
      // wait on their counter).
      const long target = decisions.load(std::memory_order_acquire) + 2 * kDeciders;
      while (decisions.load(std::memory_order_acquire) < target) std::this_thread::yield();
    }
    done.store(true, std::memory_order_release);
  });

  reloader.join();
  for (auto& thread : deciders) thread.join();

  EXPECT_EQ(mismatches.load(), 0) << first_mismatch;
  EXPECT_GE(decisions.load(), kReloads * 2L * kDeciders);
  EXPECT_EQ(seen_versions.size(), 2u);              // both policies served traffic
  EXPECT_EQ(router->policy()->version, version_a);  // an even number of swaps: back to A
}

// reload() and the file watcher may run at once (POST /admin/reload vs the watch timer).
TEST_F(RouterReloadTest, ConcurrentReloadsAndWatchTicksEndOnTheLastFile) {
  const auto router = make_router(kPolicyA);
  ASSERT_NE(router, nullptr);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) router->reload_if_changed();
  });
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(router->reload("admin").ok());
  }
  done.store(true);
  watcher.join();
  write_policy(kPolicyB);
  bump_mtime();
  two_ticks(*router);
  EXPECT_EQ(router->policy()->version, version_of(kPolicyB));
}

}  // namespace
}  // namespace hengshi::router
