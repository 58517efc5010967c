// The edge LLM on a real GGUF: a tiny random-weight qwen2 model with the real Qwen2 tokenizer,
// written by make_test_model(), so load → tokenize → decode → logprob → stream all run here.
#include "edge/llm_engine.h"

#include <gtest/gtest.h>

#ifdef HENGSHI_HAVE_LLAMA

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <random>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "core/asio.h"
#include "edge/llm_test_model.h"
#include "obs/metrics.h"
#include "support/text_checks.h"

namespace hengshi::edge {
namespace {

namespace fs = std::filesystem;

std::string vocab_file(const std::string& name) {
  return (fs::path(default_vocab_dir()) / name).string();
}

// One temporary folder and one test model per test process (ctest runs each test alone).
class LlmEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("hengshi-llm-test-" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    model_ = new std::string((*dir_ / "tiny-qwen2.gguf").string());
    auto made = make_test_model(vocab_file("ggml-vocab-qwen2.gguf"), *model_);
    ASSERT_TRUE(made.ok()) << made.error().message;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
    delete model_;
  }

  static LlmConfig config() {
    LlmConfig config;
    config.model_path = *model_;
    // One compute thread: tests share a small machine, and spinning thread pools on busy cores
    // make multi-threaded decoding slow and erratic.
    config.threads = 1;
    config.context_tokens = 256;
    config.max_tokens = 16;
    return config;
  }

  static std::unique_ptr<LlmEngine> load(const LlmConfig& config) {
    auto engine = LlmEngine::load(config);
    EXPECT_TRUE(engine.ok()) << engine.error().message;
    return engine.ok() ? std::move(engine).value() : nullptr;
  }

  static GenerationRequest request(int max_tokens) {
    GenerationRequest request;
    request.messages = {{"system", "You are a helpful assistant."},
                        {"user", "How do I reset my password?"}};
    request.max_tokens = max_tokens;
    return request;
  }

  static fs::path dir() { return *dir_; }
  static const std::string& model() { return *model_; }

 private:
  static inline fs::path* dir_ = nullptr;
  static inline std::string* model_ = nullptr;
};

void expect_valid_confidence(const Generation& g) {
  const auto& c = g.confidence;
  EXPECT_GT(c.tokens, 0);
  EXPECT_TRUE(std::isfinite(c.mean_prob));
  EXPECT_TRUE(std::isfinite(c.min_prob));
  EXPECT_TRUE(std::isfinite(c.sum_logprob));
  EXPECT_GT(c.mean_prob, 0.0);
  EXPECT_LE(c.mean_prob, 1.0);
  EXPECT_GT(c.min_prob, 0.0);
  EXPECT_LE(c.min_prob, c.mean_prob);
  EXPECT_LE(c.sum_logprob, 0.0);
}

using testing::concat;  // support/text_checks.h

TEST_F(LlmEngineTest, LoadsTheModelWithItsChatTemplate) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  EXPECT_NE(engine->model_description().find("qwen2"), std::string::npos)
      << engine->model_description();
  EXPECT_EQ(engine->chat_template_source(), "model");
  EXPECT_EQ(engine->context_tokens(), 256);
  EXPECT_EQ(engine->threads(), 1);
}

TEST_F(LlmEngineTest, FormatsAndTokenizesAChatPrompt) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  const std::string prompt = engine->format_prompt({{"system", "Be brief."}, {"user", "你好"}});
  EXPECT_NE(prompt.find("<|im_start|>system\nBe brief.<|im_end|>"), std::string::npos) << prompt;
  EXPECT_NE(prompt.find("<|im_start|>user\n你好<|im_end|>"), std::string::npos) << prompt;
  EXPECT_EQ(prompt.substr(prompt.size() - 22), "<|im_start|>assistant\n");

  auto tokens = engine->tokenize(prompt);
  EXPECT_GT(tokens.size(), 8u);
  EXPECT_EQ(engine->tokenize("<|im_start|>").size(), 1u);  // a special token, not text
}

TEST_F(LlmEngineTest, GeneratesAndStreamsPiecesThatMakeTheAnswer) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  auto& completion_tokens =
      obs::Registry::global().counter("hengshi_edge_llm_tokens_total",
                                      "Tokens processed by the edge LLM", {{"kind", "completion"}});
  const double tokens_before = completion_tokens.value();

  std::vector<std::string> pieces;
  const auto caller = std::this_thread::get_id();
  std::thread::id worker;
  auto result = engine->generate_blocking(request(24), [&](std::string_view piece) {
    pieces.emplace_back(piece);
    worker = std::this_thread::get_id();
    return true;
  });
  ASSERT_TRUE(result.ok()) << result.error().message;
  const Generation& g = *result;
  EXPECT_GT(g.prompt_tokens, 10);
  EXPECT_GT(g.completion_tokens, 0);
  EXPECT_LE(g.completion_tokens, 24);
  EXPECT_FALSE(pieces.empty());
  EXPECT_EQ(concat(pieces), g.text);
  EXPECT_NE(worker, caller);  // generation ran on the engine's worker
  expect_valid_confidence(g);
  EXPECT_GT(g.generation.count(), 0);
  EXPECT_EQ(completion_tokens.value() - tokens_before, g.completion_tokens);
}

TEST_F(LlmEngineTest, GreedyGenerationIsDeterministic) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  auto first = engine->generate_blocking(request(12));
  auto second = engine->generate_blocking(request(12));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(first->text, second->text);
  EXPECT_DOUBLE_EQ(first->confidence.sum_logprob, second->confidence.sum_logprob);
}

TEST_F(LlmEngineTest, HonoursMaxTokens) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  for (int max_tokens : {1, 5}) {
    auto g = engine->generate_blocking(request(max_tokens));
    ASSERT_TRUE(g.ok()) << g.error().message;
    EXPECT_LE(g->completion_tokens, max_tokens);
    if (g->finish_reason == FinishReason::length) {
      EXPECT_EQ(g->completion_tokens, max_tokens);
    }
  }
  // No max_tokens in the request: the configured default (16) applies.
  auto g = engine->generate_blocking(request(0));
  ASSERT_TRUE(g.ok());
  EXPECT_LE(g->completion_tokens, 16);
}

TEST_F(LlmEngineTest, StopSequenceEndsTheAnswerBeforeIt) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  std::vector<std::string> free_pieces;
  auto free_run = engine->generate_blocking(request(32), [&](std::string_view piece) {
    free_pieces.emplace_back(piece);
    return true;
  });
  ASSERT_TRUE(free_run.ok());
  ASSERT_GE(free_pieces.size(), 6u) << "the model should produce several pieces";
  // A stop sequence taken from the middle of the free answer: the answer must end right before
  // its first occurrence, and no streamed piece may contain any of it.
  const std::string stop = free_pieces[free_pieces.size() / 2];
  const std::size_t at = free_run->text.find(stop);
  ASSERT_NE(at, std::string::npos);

  auto stopped_request = request(32);
  stopped_request.stop = {stop};
  std::vector<std::string> pieces;
  auto stopped = engine->generate_blocking(stopped_request, [&](std::string_view piece) {
    pieces.emplace_back(piece);
    return true;
  });
  ASSERT_TRUE(stopped.ok());
  EXPECT_EQ(stopped->finish_reason, FinishReason::stop);
  EXPECT_EQ(stopped->text, free_run->text.substr(0, at));
  EXPECT_EQ(concat(pieces), stopped->text);
  EXPECT_EQ(stopped->text.find(stop), std::string::npos);
}

TEST_F(LlmEngineTest, CancelFromAnotherThreadStopsWithinOneToken) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  std::stop_source stop;
  std::promise<void> third_piece;
  std::promise<void> stop_requested;
  // The canceller runs on its own thread; the worker waits until it has fired, then the
  // generation must end before producing another token.
  std::thread canceller([&] {
    third_piece.get_future().wait();
    stop.request_stop();
    stop_requested.set_value();
  });
  int pieces = 0;
  auto g = engine->generate_blocking(
      request(64),
      [&](std::string_view) {
        if (++pieces == 3) {
          third_piece.set_value();
          stop_requested.get_future().wait();
        }
        return true;
      },
      stop.get_token());
  if (pieces < 3) third_piece.set_value();  // too short an answer: release the canceller
  canceller.join();
  ASSERT_TRUE(g.ok()) << g.error().message;
  ASSERT_GE(pieces, 3);
  EXPECT_EQ(g->finish_reason, FinishReason::cancelled);
  EXPECT_LE(pieces, 4);  // the third, plus at most a held-back tail flushed at the end
  EXPECT_LT(g->completion_tokens, 64);
  expect_valid_confidence(*g);
}

TEST_F(LlmEngineTest, SinkReturningFalseStops) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  int pieces = 0;
  auto g = engine->generate_blocking(request(64), [&](std::string_view) { return ++pieces < 2; });
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->finish_reason, FinishReason::cancelled);
  EXPECT_EQ(pieces, 2);
  EXPECT_LT(g->completion_tokens, 64);
}

TEST_F(LlmEngineTest, ExpiredDeadlineGeneratesNothing) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  auto expired = request(16);
  expired.deadline = Deadline(Clock::now() - Millis(1));
  auto g = engine->generate_blocking(expired);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->finish_reason, FinishReason::deadline);
  EXPECT_EQ(g->completion_tokens, 0);
  EXPECT_TRUE(g->text.empty());
}

TEST_F(LlmEngineTest, DeadlinePassingMidGenerationStopsIt) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  auto bounded = request(64);
  bounded.deadline = Deadline::after(Millis(30));
  int pieces = 0;
  auto g = engine->generate_blocking(bounded, [&](std::string_view) {
    // Hold the second piece until the deadline has passed (a condition, not a timed sleep).
    if (++pieces == 2) {
      while (!bounded.deadline.passed()) std::this_thread::yield();
    }
    return true;
  });
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->finish_reason, FinishReason::deadline);
  EXPECT_LT(g->completion_tokens, 64);
}

TEST_F(LlmEngineTest, AsyncGenerateStreamsOnTheCallersExecutor) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  auto expected = engine->generate_blocking(request(20));
  ASSERT_TRUE(expected.ok());

  asio::io_context io;
  std::vector<std::string> pieces;
  std::vector<std::thread::id> piece_threads;
  std::optional<Result<Generation>> result;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        PieceSink sink = [&](std::string_view piece) -> awaitable<bool> {
          pieces.emplace_back(piece);
          piece_threads.push_back(std::this_thread::get_id());
          co_return true;
        };
        result.emplace(co_await engine->generate(request(20), sink, CancelToken{}));
      },
      asio::detached);
  io.run();  // returns only when the generation has finished (the wait holds work)

  ASSERT_TRUE(result.has_value());
  ASSERT_TRUE(result->ok()) << result->error().message;
  EXPECT_EQ((*result)->text, expected->text);
  EXPECT_EQ(concat(pieces), (*result)->text);
  for (auto id : piece_threads) EXPECT_EQ(id, std::this_thread::get_id());
}

TEST_F(LlmEngineTest, AsyncCancelTokenStopsGeneration) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  asio::io_context io;
  CancelToken cancel;
  int pieces = 0;
  std::optional<Result<Generation>> result;
  asio::co_spawn(
      io,
      [&]() -> awaitable<void> {
        PieceSink sink = [&](std::string_view) -> awaitable<bool> {
          if (++pieces == 3) cancel.cancel();  // e.g. the client went away
          co_return true;
        };
        result.emplace(co_await engine->generate(request(64), sink, cancel));
      },
      asio::detached);
  io.run();
  ASSERT_TRUE(result && result->ok());
  EXPECT_EQ((*result)->finish_reason, FinishReason::cancelled);
  EXPECT_EQ(pieces, 3);  // pieces after the cancel are not delivered
  EXPECT_LT((*result)->completion_tokens, 64);
}

TEST_F(LlmEngineTest, TwoWorkersServeConcurrentRequestsAlike) {
  auto cfg = config();
  cfg.workers = 2;
  cfg.threads = 1;
  auto engine = load(cfg);
  ASSERT_TRUE(engine);
  auto reference = engine->generate_blocking(request(12));
  ASSERT_TRUE(reference.ok());

  asio::io_context io;
  std::vector<std::optional<Result<Generation>>> results(4);
  for (auto& slot : results) {
    asio::co_spawn(
        io,
        [&engine, &slot]() -> awaitable<void> {
          slot.emplace(co_await engine->generate(request(12), PieceSink{}, CancelToken{}));
        },
        asio::detached);
  }
  io.run();
  for (auto& slot : results) {
    ASSERT_TRUE(slot && slot->ok());
    EXPECT_EQ((*slot)->text, reference->text);
  }
}

TEST_F(LlmEngineTest, FullQueueIsRefused) {
  auto cfg = config();
  cfg.max_queue = 0;  // only what a worker is running; nothing may wait
  auto engine = load(cfg);
  ASSERT_TRUE(engine);
  std::promise<void> running;
  std::promise<void> release;
  std::thread first([&] {
    bool once = true;
    auto g = engine->generate_blocking(request(4), [&](std::string_view) {
      if (std::exchange(once, false)) {
        running.set_value();
        release.get_future().wait();
      }
      return true;
    });
    EXPECT_TRUE(g.ok()) << g.error().message;
    if (once) running.set_value();  // never streamed: do not leave the test waiting
  });
  running.get_future().wait();
  auto refused = engine->generate_blocking(request(4));
  release.set_value();
  first.join();
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "edge_llm_busy");
}

TEST_F(LlmEngineTest, PromptLongerThanTheContextIsAnError) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  GenerationRequest huge;
  std::string text;
  for (int i = 0; i < 400; ++i) text += "word" + std::to_string(i) + " ";
  huge.messages = {{"user", text}};
  auto g = engine->generate_blocking(huge);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, "prompt_too_long");
}

TEST_F(LlmEngineTest, SampledGenerationWithTemperature) {
  auto engine = load(config());
  ASSERT_TRUE(engine);
  auto sampled = request(12);
  sampled.temperature = 0.8f;
  sampled.seed = 7;
  auto a = engine->generate_blocking(sampled);
  auto b = engine->generate_blocking(sampled);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->text, b->text);  // same seed, same answer
  expect_valid_confidence(*a);
}

TEST_F(LlmEngineTest, EdgeMessagesUseTheConfiguredSummary) {
  auto cfg = config();
  cfg.summary_turns = 2;
  auto engine = load(cfg);
  ASSERT_TRUE(engine);
  std::vector<ChatMessage> conversation{{"system", "s"}, {"user", "u1"},      {"assistant", "a1"},
                                        {"user", "u2"},  {"assistant", "a2"}, {"user", "u3"}};
  auto edge = engine->edge_messages(conversation);
  ASSERT_EQ(edge.size(), 4u);
  EXPECT_EQ(edge[1].text, "u2");
  EXPECT_EQ(edge[3].text, "u3");
}

// ---- bad model files ----

TEST_F(LlmEngineTest, MissingFileNamesIt) {
  auto cfg = config();
  cfg.model_path = (dir() / "no-such-model.gguf").string();
  auto engine = LlmEngine::load(cfg);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.error().code, "model_not_found");
  EXPECT_NE(engine.error().message.find(cfg.model_path), std::string::npos);
}

TEST_F(LlmEngineTest, CorruptFileNamesIt) {
  const auto path = (dir() / "random-bytes.gguf").string();
  {
    std::mt19937 rng(1);
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 8192; ++i) out.put(static_cast<char>(rng() & 0xFF));
  }
  auto cfg = config();
  cfg.model_path = path;
  auto engine = LlmEngine::load(cfg);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.error().code, "model_corrupt");
  EXPECT_NE(engine.error().message.find(path), std::string::npos) << engine.error().message;
}

TEST_F(LlmEngineTest, TruncatedModelIsRefused) {
  const auto path = (dir() / "truncated.gguf").string();
  {
    std::ifstream in(model(), std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  auto cfg = config();
  cfg.model_path = path;
  auto engine = LlmEngine::load(cfg);
  ASSERT_FALSE(engine.ok());
  EXPECT_NE(engine.error().message.find(path), std::string::npos) << engine.error().message;
}

TEST_F(LlmEngineTest, NanLogitsAreAnErrorNotAStreamOfTokenZero) {
  // Weights of all-ones bits (NaN in F16 and F32) at the end of the file: the file loads, but
  // every forward pass gives NaN — as an adapter whose F16 factors overflowed did.
  const auto path = (dir() / "nan.gguf").string();
  {
    std::ifstream in(model(), std::ios::binary);
    std::string bytes(std::istreambuf_iterator<char>(in), {});
    std::fill(bytes.end() - 4096, bytes.end(), '\xff');
    std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto cfg = config();
  cfg.model_path = path;
  auto engine = LlmEngine::load(cfg);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  GenerationRequest request;
  request.messages = {{"user", "hello"}};
  request.max_tokens = 8;
  auto generated = (*engine)->generate_blocking(request);
  ASSERT_FALSE(generated.ok()) << generated->text;
  EXPECT_EQ(generated.error().code, "decode_failed");
  EXPECT_NE(generated.error().message.find("NaN"), std::string::npos);
}

TEST_F(LlmEngineTest, UnsupportedArchitectureIsRefused) {
  const auto path = (dir() / "nonsense.gguf").string();
  TestModelOptions options;
  options.architecture = "nonsense";
  ASSERT_TRUE(make_test_model(vocab_file("ggml-vocab-qwen2.gguf"), path, options).ok());
  auto cfg = config();
  cfg.model_path = path;
  auto engine = LlmEngine::load(cfg);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.error().code, "model_unsupported_architecture");
  EXPECT_NE(engine.error().message.find(path), std::string::npos);
  EXPECT_NE(engine.error().message.find("'nonsense'"), std::string::npos);
}

TEST_F(LlmEngineTest, InvalidConfigNamesTheField) {
  auto cfg = config();
  cfg.workers = 0;
  auto engine = LlmEngine::load(cfg);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.error().code, "config_invalid");
  EXPECT_NE(engine.error().message.find("workers"), std::string::npos);
}

// ---- the test-model generator ----

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(LlmEngineTest, TestModelIsReproducible) {
  const auto again = (dir() / "again.gguf").string();
  ASSERT_TRUE(make_test_model(vocab_file("ggml-vocab-qwen2.gguf"), again).ok());
  EXPECT_EQ(read_all(again), read_all(model()));
  const auto other_seed = (dir() / "seed7.gguf").string();
  TestModelOptions options;
  options.seed = 7;
  ASSERT_TRUE(make_test_model(vocab_file("ggml-vocab-qwen2.gguf"), other_seed, options).ok());
  EXPECT_NE(read_all(other_seed), read_all(model()));
}

TEST_F(LlmEngineTest, MissingVocabularyIsAnError) {
  auto made = make_test_model((dir() / "nope.gguf").string(), (dir() / "out.gguf").string());
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().message.find("nope.gguf"), std::string::npos);
}

TEST_F(LlmEngineTest, LlamaArchitectureWithSentencePieceVocabulary) {
  const auto path = (dir() / "tiny-llama.gguf").string();
  TestModelOptions options;
  options.architecture = "llama";
  options.chat_template = false;  // exercises the fallback template
  ASSERT_TRUE(make_test_model(vocab_file("ggml-vocab-llama-spm.gguf"), path, options).ok());
  auto cfg = config();
  cfg.model_path = path;
  auto engine = load(cfg);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->chat_template_source(), "plain (fallback)");
  auto g = engine->generate_blocking(request(8));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_GT(g->completion_tokens, 0);
  expect_valid_confidence(*g);
}

TEST_F(LlmEngineTest, ModelWithoutTemplateFallsBackToChatMl) {
  const auto path = (dir() / "no-template.gguf").string();
  TestModelOptions options;
  options.chat_template = false;
  ASSERT_TRUE(make_test_model(vocab_file("ggml-vocab-qwen2.gguf"), path, options).ok());
  auto cfg = config();
  cfg.model_path = path;
  auto engine = load(cfg);
  ASSERT_TRUE(engine);
  EXPECT_EQ(engine->chat_template_source(), "chatml (fallback)");
  EXPECT_NE(engine->format_prompt({{"user", "hi"}}).find("<|im_start|>user\nhi"),
            std::string::npos);
}

TEST_F(LlmEngineTest, CutVocabularyTokenizesItsCorpusAsTheWholeOne) {
  const std::string corpus = "退款什么时候到账？Refunds arrive in 1–3 business days.";
  const auto path = (dir() / "cut.gguf").string();
  TestModelOptions options;
  options.vocab_corpus = {corpus};
  options.untied_output = true;
  ASSERT_TRUE(make_test_model(vocab_file("ggml-vocab-qwen2.gguf"), path, options).ok());
  EXPECT_LT(fs::file_size(path), fs::file_size(model()) / 10);  // 151k tokens → a few hundred
  auto cfg = config();
  cfg.model_path = path;
  auto cut = load(cfg);
  auto whole = load(config());
  ASSERT_TRUE(cut && whole);
  // The corpus tokenizes to as many tokens, special tokens still parse as one, and text the cut
  // dropped falls back to smaller pieces.
  EXPECT_EQ(cut->tokenize(corpus).size(), whole->tokenize(corpus).size());
  EXPECT_EQ(cut->tokenize("<|im_start|>").size(), 1u);
  const std::string other = "Quantum chromodynamics";
  EXPECT_GT(cut->tokenize(other).size(), whole->tokenize(other).size());
  auto g = cut->generate_blocking(request(8));
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_GT(g->completion_tokens, 0);

  TestModelOptions spm;
  spm.vocab_limit = 1000;
  auto refused = make_test_model(vocab_file("ggml-vocab-llama-spm.gguf"), (dir() / "x.gguf").string(), spm);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("BPE"), std::string::npos);
}

TEST_F(LlmEngineTest, AdaptersAreCheckedAtLoadAndByName) {
  auto cfg = config();
  cfg.adapters = {{"faq", model(), 1.0f}};  // a model, not an adapter
  auto refused = LlmEngine::load(cfg);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "adapter_load_failed");
  EXPECT_NE(refused.error().message.find("\"faq\""), std::string::npos) << refused.error().message;

  cfg.adapters = {{"", model(), 1.0f}};
  EXPECT_EQ(LlmEngine::load(cfg).error().code, "config_invalid");

  auto engine = load(config());
  ASSERT_TRUE(engine);
  auto r = request(4);
  r.adapter = "billing";
  auto g = engine->generate_blocking(r);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.error().code, "adapter_unknown");
  // The worker still serves the base afterwards.
  EXPECT_TRUE(engine->generate_blocking(request(4)).ok());
}

}  // namespace
}  // namespace hengshi::edge

#else  // !HENGSHI_HAVE_LLAMA

TEST(LlmEngineTest, SkippedWithoutLlama) {
  GTEST_SKIP() << "built without llama.cpp: run scripts/fetch-llama and reconfigure";
}

#endif
