// AnswerCache in memory: keys and scopes, the semantic tier and its guards, TTL and the stale
// window, tag invalidation, and the two buckets' bounds — with a fake clock, nothing sleeps.
#include "cache/answer_cache.h"

#include <gtest/gtest.h>

#include "cache/ngram_embedder.h"
#include "edge/text_normalizer.h"
#include "support/run_until_done.h"

namespace hengshi::cache {
namespace {

using nlohmann::json;

ChatRequest request_of(const json& body) {
  auto parsed = parse_chat_request(body.dump());
  EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
  return parsed.ok() ? *parsed : ChatRequest{};
}

ChatRequest question(const std::string& text, const json& extra = json::object()) {
  json body = {{"model", "auto"}, {"messages", json::array({{{"role", "user"}, {"content", text}}})}};
  for (const auto& [key, value] : extra.items()) body[key] = value;
  return request_of(body);
}

CachedAnswer answer(const std::string& text) {
  CachedAnswer out;
  out.content = text;
  out.model = "sim-small";
  out.source = "cloud-small";
  return out;
}

class AnswerCacheTest : public ::testing::Test {
 protected:
  AnswerCacheTest() { config_.threshold = 0.8; }

  AnswerCache& make() {
    auto normalizer = std::make_shared<edge::TextNormalizer>();
    TextForms forms;
    forms.normalize = [normalizer](std::string_view text) { return normalizer->normalize(text); };
    forms.canonical = [normalizer](std::string_view text) { return normalizer->to_model_input(text); };
    auto embedder = std::make_shared<NgramEmbedder>(1024, forms.normalize);
    cache_ = std::make_unique<AnswerCache>(config_, embedder, forms, nullptr, registry_);
    cache_->use_clock([this] { return now_ms_; });
    return *cache_;
  }

  CacheQuery query_of(const ChatRequest& request, std::string_view key_scope = "shared",
                      const std::string& intent = "") {
    return cache_->query(request, ScopeParts{"cloud-small", request.model, request.hengshi.task_type, key_scope},
                         intent);
  }

  std::optional<CacheHit> lookup(CacheQuery query) {
    asio::io_context io;
    std::optional<CacheHit> hit;
    asio::co_spawn(io, [&]() -> awaitable<void> { hit = co_await cache_->lookup(query); }, asio::detached);
    io.run();
    return hit;
  }

  void fill(const ChatRequest& request, const std::string& text, std::string_view key_scope = "shared",
            const std::string& intent = "") {
    CacheQuery query = query_of(request, key_scope, intent);
    cache_->fill(query, answer(text));
  }

  double counter(const std::string& name, const obs::Labels& labels) { return registry_.counter(name, "", labels).value(); }

  CacheConfig config_;
  obs::Registry registry_;
  std::unique_ptr<AnswerCache> cache_;
  std::int64_t now_ms_ = 1'800'000'000'000;
};

TEST_F(AnswerCacheTest, TheSameQuestionIsAnExactHitWhateverItsCaseSpacesAndPunctuation) {
  make();
  fill(question("How do I reset my password?"), "Settings → Security → Reset.");
  auto hit = lookup(query_of(question("  how do I RESET my password ")));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, CacheTier::exact);
  EXPECT_EQ(hit->entry->answer.content, "Settings → Security → Reset.");
  // Full-width characters fold too (NFKC).
  fill(question("订单ABC到哪了"), "在路上");
  EXPECT_TRUE(lookup(query_of(question("订单ＡＢＣ到哪了？"))));
}

TEST_F(AnswerCacheTest, TheScopeKeepsOtherPromptsTurnsSamplingAndTenantsApart) {
  make();
  const json system = {{"role", "system"}, {"content", "You are a bank assistant."}};
  const json user = {{"role", "user"}, {"content", "What is the fee?"}};
  fill(request_of({{"model", "auto"}, {"messages", {system, user}}}), "0.5%");
  EXPECT_TRUE(lookup(query_of(request_of({{"model", "auto"}, {"messages", {system, user}}}))));
  // Another system prompt, another earlier turn, another sampling field, another model asked
  // for, another tenant: all misses.
  const json other_system = {{"role", "system"}, {"content", "You are a shop assistant."}};
  EXPECT_FALSE(lookup(query_of(request_of({{"model", "auto"}, {"messages", {other_system, user}}}))));
  const json earlier = {{"role", "user"}, {"content", "I mean the gold card."}};
  const json reply = {{"role", "assistant"}, {"content", "Sure."}};
  EXPECT_FALSE(lookup(query_of(request_of({{"model", "auto"}, {"messages", {system, earlier, reply, user}}}))));
  for (const json& field : {json{{"temperature", 1.2}}, json{{"max_tokens", 5}}, json{{"top_p", 0.5}},
                            json{{"response_format", {{"type", "json_object"}}}},
                            json{{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}}}) {
    json body = {{"model", "auto"}, {"messages", {system, user}}};
    body.update(field);
    EXPECT_FALSE(lookup(query_of(request_of(body)))) << field.dump();
  }
  EXPECT_FALSE(lookup(query_of(request_of({{"model", "cloud-large"}, {"messages", {system, user}}}))));
  EXPECT_FALSE(lookup(query_of(request_of({{"model", "auto"}, {"messages", {system, user}}}), "team-b")));
  // Fields that do not change the answer are left out.
  EXPECT_TRUE(lookup(query_of(request_of(
      {{"model", "auto"}, {"messages", {system, user}}, {"user", "u-42"}, {"stream", true}, {"metadata", {{"a", "b"}}}}))));
}

TEST_F(AnswerCacheTest, ACloseParaphraseIsASemanticHitButANegationOrANumberIsRefused) {
  make();
  fill(question("How do I reset my account password?"), "Settings → Security.");
  auto hit = lookup(query_of(question("How do I reset my account password please?")));
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->tier, CacheTier::semantic);
  EXPECT_GE(hit->similarity, 0.8f);
  EXPECT_LT(hit->similarity, 1.0f);
  EXPECT_FALSE(lookup(query_of(question("How do I not reset my account password?"))));
  EXPECT_EQ(counter("hengshi_cache_guard_rejections_total", {{"guard", "polarity"}}), 1.0);
  fill(question("where is my order 12345 now"), "in Hangzhou");
  EXPECT_FALSE(lookup(query_of(question("where is my order 12346 now"))));
  EXPECT_EQ(counter("hengshi_cache_guard_rejections_total", {{"guard", "numbers"}}), 1.0);
  EXPECT_FALSE(lookup(query_of(question("What is the weather like on Mars?"))));
}

TEST_F(AnswerCacheTest, WithAnIntentModelASemanticHitNeedsTheSameIntent) {
  make();
  fill(question("my new card has still not arrived"), "It ships in 3 days.", "shared", "card_arrival");
  // The same words, another intent by the edge's reading: refused, and counted.
  EXPECT_FALSE(lookup(query_of(question("my new card has still not arrived yet"), "shared", "card_delivery_estimate")));
  EXPECT_EQ(counter("hengshi_cache_guard_rejections_total", {{"guard", "intent"}}), 1.0);
  // Out of scope by the edge's reading is a label too: never answered with an in-scope entry.
  EXPECT_FALSE(lookup(query_of(question("my new card has still not arrived yet"), "shared", "__oos__")));
  EXPECT_EQ(counter("hengshi_cache_guard_rejections_total", {{"guard", "intent"}}), 2.0);
  // The same intent: a hit; no intent for the query (no model): the text guards only.
  EXPECT_TRUE(lookup(query_of(question("my new card has still not arrived yet"), "shared", "card_arrival")));
  EXPECT_TRUE(lookup(query_of(question("my new card has still not arrived yet"), "shared", "")));
  // Two questions the model calls out of scope may still share an answer (the n-gram tier reads
  // their surface, which means the same in or out of the model's domain).
  fill(question("what is the weather like in Paris today"), "Sunny.", "shared", "__oos__");
  auto both_out = lookup(query_of(question("what is the weather like in Paris today please"), "shared", "__oos__"));
  ASSERT_TRUE(both_out);
  EXPECT_EQ(both_out->tier, CacheTier::semantic);
  EXPECT_EQ(cache_->invalidate({"intent:__oos__"}), 1u);
}

TEST_F(AnswerCacheTest, ALongTemplatedPromptIsNeverASemanticHitOnlyAnExactOne) {
  // Two multiple-choice questions sharing their template: nearly the same n-grams, different
  // questions. Past semantic_max_chars only the exact tier answers.
  const std::string stem = "Which of the following best describes the main function of the organ below? Options: "
                           "A. filtering blood B. producing hormones C. storing energy D. pumping blood. Organ: ";
  make();
  fill(question(stem + "the heart"), "D");
  EXPECT_FALSE(lookup(query_of(question(stem + "the liver")))) << "a template is not a paraphrase";
  auto exact = lookup(query_of(question(stem + "the heart")));
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->tier, CacheTier::exact);
  // With no limit, the same pair is the false hit the limit exists for.
  config_.semantic_max_chars = 0;
  make();
  fill(question(stem + "the heart"), "D");
  auto false_hit = lookup(query_of(question(stem + "the liver")));
  ASSERT_TRUE(false_hit);
  EXPECT_EQ(false_hit->tier, CacheTier::semantic);
}

TEST_F(AnswerCacheTest, EntriesExpireAndStayStaleForTheLastResortWindow) {
  config_.ttl_s = 60;
  config_.stale_if_error_s = 600;
  make();
  fill(question("opening hours?"), "9 to 5");
  const CacheQuery query = query_of(question("opening hours?"));
  now_ms_ += 59'000;
  EXPECT_TRUE(lookup(query));
  now_ms_ += 2'000;  // past the TTL: no fresh hit, but stale for the last resort
  EXPECT_FALSE(lookup(query));
  auto stale = cache_->stale(query);
  ASSERT_TRUE(stale);
  EXPECT_EQ(stale->tier, CacheTier::stale);
  EXPECT_EQ(stale->entry->answer.content, "9 to 5");
  now_ms_ += 600'000;  // past the stale window too: gone
  EXPECT_FALSE(cache_->stale(query));
  // A task type's own TTL.
  config_.task_types["news"].ttl_s = 5;
  make();
  fill(question("headline?", {{"hengshi", {{"task_type", "news"}}}}), "old news");
  now_ms_ += 6'000;
  EXPECT_FALSE(lookup(query_of(question("headline?", {{"hengshi", {{"task_type", "news"}}}}))));
}

TEST_F(AnswerCacheTest, InvalidatingATagRemovesExactlyTheEntriesCarryingIt) {
  make();
  fill(question("refund policy?", {{"hengshi", {{"tags", {"policy", "refunds"}}}}}), "30 days");
  fill(question("shipping policy?", {{"hengshi", {{"tags", {"policy"}}}}}), "free over 99");
  fill(question("where is my order", {{"hengshi", {{"tags", {"orders"}}}}}), "on its way", "shared", "order_status");
  fill(question("store hours?"), "9 to 5");
  EXPECT_EQ(cache_->invalidate({"refunds"}), 1u);
  EXPECT_FALSE(lookup(query_of(question("refund policy?", {{"hengshi", {{"tags", {"policy", "refunds"}}}}}))));
  EXPECT_TRUE(lookup(query_of(question("shipping policy?", {{"hengshi", {{"tags", {"policy"}}}}}))));
  EXPECT_EQ(cache_->invalidate({"policy", "no-such-tag"}), 1u);
  // The edge's intent is a tag too.
  EXPECT_EQ(cache_->invalidate({"intent:order_status"}), 1u);
  EXPECT_TRUE(lookup(query_of(question("store hours?"))));
  EXPECT_EQ(cache_->invalidate_all(), 1u);
  EXPECT_FALSE(lookup(query_of(question("store hours?"))));
  EXPECT_EQ(counter("hengshi_cache_invalidated_entries_total", {}), 4.0);
}

TEST_F(AnswerCacheTest, HotKeepsTheRecentColdEvictsTheColdestFirst) {
  config_.hot.max_entries = 2;
  config_.cold.max_entries = 2;
  config_.semantic = false;
  make();
  auto step = [this] { now_ms_ += 1000; };
  fill(question("q1"), "a1");
  step();
  fill(question("q2"), "a2");
  step();
  EXPECT_EQ(cache_->hot_entries(), 2u);
  fill(question("q3"), "a3");  // hot q3 q2; q1, the least recently used, moves to cold
  step();
  EXPECT_EQ(cache_->hot_entries(), 2u);
  EXPECT_EQ(cache_->cold_entries(), 1u);
  EXPECT_TRUE(lookup(query_of(question("q1"))));  // back to hot (1 hit): hot q1 q3, cold q2
  step();
  fill(question("q4"), "a4");  // hot q4 q1, cold q2 q3
  step();
  EXPECT_EQ(cache_->cold_entries(), 2u);
  EXPECT_TRUE(lookup(query_of(question("q1"))));  // q1 has 2 hits now
  step();
  fill(question("q5"), "a5");  // hot q5 q1; q4 goes cold: q2 q3 q4, one too many
  // Among the cold, none was hit: the least recently used, q2, is the coldest and goes.
  EXPECT_EQ(cache_->cold_entries(), 2u);
  EXPECT_FALSE(lookup(query_of(question("q2"))));
  EXPECT_TRUE(lookup(query_of(question("q3"))));
  EXPECT_EQ(counter("hengshi_cache_evictions_total", {{"bucket", "cold"}}), 1.0);
  EXPECT_GE(counter("hengshi_cache_evictions_total", {{"bucket", "hot"}}), 3.0);
}

TEST_F(AnswerCacheTest, EntriesUnusedForTheHotWindowMoveToCold) {
  config_.hot_window_s = 60;
  config_.semantic = false;
  make();
  fill(question("old"), "a");
  now_ms_ += 61'000;
  fill(question("new"), "b");
  EXPECT_EQ(cache_->hot_entries(), 1u);
  EXPECT_EQ(cache_->cold_entries(), 1u);
  EXPECT_TRUE(lookup(query_of(question("old")))) << "cold entries still answer";
}

TEST_F(AnswerCacheTest, MemoryStaysUnderTheByteBoundsHoweverManyEntries) {
  config_.hot.max_bytes = 64 * 1024;
  config_.cold.max_bytes = 256 * 1024;
  make();
  const std::string long_answer(2000, 'x');
  for (int i = 0; i < 2000; ++i) fill(question("question number " + std::to_string(i)), long_answer);
  const json stats = cache_->stats();
  EXPECT_LE(stats["hot"]["bytes"].get<std::size_t>(), 64u * 1024);
  EXPECT_LE(stats["cold"]["bytes"].get<std::size_t>(), 256u * 1024);
  EXPECT_LT(stats["entries"].get<int>(), 2000);
  // The semantic index follows the entries: tombstones stay a bounded share of it.
  EXPECT_LE(stats["index"]["tombstones"].get<double>(), 0.25 * stats["index"]["entries"].get<double>() + 8);
  EXPECT_TRUE(lookup(query_of(question("question number 1999"))));
}

TEST_F(AnswerCacheTest, UncacheableRequestsAreNamed) {
  EXPECT_EQ(uncacheable(question("hi", {{"n", 2}})), "n > 1");
  EXPECT_EQ(uncacheable(question("hi", {{"seed", 7}})), "seed");
  EXPECT_EQ(uncacheable(question("hi")), std::nullopt);
  EXPECT_EQ(uncacheable(request_of({{"messages", json::array({{{"role", "user"},
                                                               {"content", json::array({{{"type", "image_url"},
                                                                                         {"image_url", {{"url", "x"}}}},
                                                                                        {{"type", "text"}, {"text", "what is it"}}})}}})}})),
            "non_text_parts");
  EXPECT_EQ(uncacheable(question("hi", {{"n", 1}})), std::nullopt);
  EXPECT_EQ(uncacheable(question("hi", {{"n", nullptr}})), "n > 1");
}

// Keys are read from the request's parse as its DOM reads: the same scope for a body whatever the
// order of its members or a repeated name's hidden first value, and the same as for a request
// given that DOM (set_body), so keys stay what they were when they were computed from the DOM.
TEST_F(AnswerCacheTest, TheScopeIsTheDomsWhateverTheTextsOrder) {
  const ScopeParts parts{"cloud-small", "auto", "faq", "shared"};
  const std::string a = R"({"model":"auto","temperature":1,"temperature":0.5,"stop":["x","y"],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"b":1,"a":[1.5,-0,1e3]}}}],
      "messages":[{"role":"system","content":"be brief \u00e9 \"q\""},{"role":"user","content":"hi"}]})";
  const std::string b = R"({"messages":[{"content":"be brief \u00e9 \"q\"","role":"system"},{"role":"user","content":"hi"}],
      "tools":[{"function":{"parameters":{"a":[1.5,-0,1e3],"b":1},"name":"f"},"type":"function"}],
      "stop":["x","y"],"temperature":0.5,"model":"auto"})";
  auto from_a = parse_chat_request(a);
  auto from_b = parse_chat_request(b);
  ASSERT_TRUE(from_a.ok() && from_b.ok());
  ChatRequest from_dom;
  from_dom.messages = from_a->messages;
  from_dom.set_body(json::parse(a));
  EXPECT_EQ(scope_hash(*from_a, parts), scope_hash(*from_b, parts));
  EXPECT_EQ(scope_hash(*from_a, parts), scope_hash(from_dom, parts));
  // A value the DOM holds differently is another scope.
  auto other = parse_chat_request(R"({"model":"auto","temperature":0.7,"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(scope_hash(*from_a, parts), scope_hash(*other, parts));
  EXPECT_EQ(uncacheable(*from_a), std::nullopt);
  EXPECT_EQ(from_a->body_dom, nullptr) << "the cache's keys built the DOM";
}

}  // namespace
}  // namespace hengshi::cache
