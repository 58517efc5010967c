// The answer cache through the real gateway, with hengshi-sim as the cloud (its counters say
// whether an upstream call happened): exact and semantic hits, tag invalidation on the admin
// listener, a cached stream replayed as SSE, the stale entry at L4 when the cloud is down, and
// the requests the cache must leave alone (PII, Cache-Control, hengshi.cache: false).
#include <string>

#include "integration/gateway_fixture.h"
#include "support/wait_until.h"

namespace hengshi::testing {
namespace {

using nlohmann::json;

class GatewayCacheTest : public GatewayFixture {
 protected:
  void start_cached(const std::string& cache_yaml = "cache: {threshold: 0.8}\n") {
    GatewayOptions options;
    options.cache_yaml = cache_yaml;
    start(options);
  }
  static std::string ask(const std::string& text, const json& extra = json::object()) {
    json body = {{"model", "cloud-small"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
    body.update(extra);
    return body.dump();
  }
  void set_profile(ChildProcess& sim, const json& profile) {
    auto result = http_call(sim.host(), sim.port(), {"POST", "/admin/profile", profile.dump(), "application/json", {}});
    ASSERT_EQ(result.status, 200) << result.body;
  }
  static std::string content_of(const HttpResult& result) {
    return result.json()["choices"][0]["message"]["content"].get<std::string>();
  }
};

TEST_F(GatewayCacheTest, ARepeatedQuestionIsServedWithoutAnUpstreamCall) {
  start_cached();
  auto first = chat(ask("Where is my order 4711?"));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["hengshi"]["cache"], "miss");
  EXPECT_EQ(first.header("x-hengshi-cache"), "miss");
  auto second = chat(ask("where is my order 4711"));
  ASSERT_EQ(second.status, 200) << second.body;
  const json meta = second.json()["hengshi"];
  EXPECT_EQ(meta["cache"], "exact");
  EXPECT_EQ(second.header("x-hengshi-cache"), "exact");
  EXPECT_EQ(meta["answered_by"], "cache");
  EXPECT_EQ(meta["answer_kind"], "model");
  EXPECT_EQ(meta["attempts"], 0);
  EXPECT_EQ(meta["cache_similarity"], 1.0);
  EXPECT_EQ(meta["cache_entry"].get<std::string>().size(), 16u);
  EXPECT_EQ(content_of(second), content_of(first));
  EXPECT_EQ(sim_requests(*small_), 1) << "the second answer came from the cache";
  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find(R"(hengshi_cache_hits_total{tier="exact",task_type="default"} 1)"), std::string::npos)
      << metrics.substr(0, 3000);
  const json stats = admin_get("/admin/cache/stats").json();
  EXPECT_EQ(stats["entries"], 1);
  EXPECT_EQ(stats["hits"], 1);
}

TEST_F(GatewayCacheTest, AParaphraseIsASemanticHitAndANegationIsNot) {
  start_cached();
  ASSERT_EQ(chat(ask("How do I reset my account password?")).status, 200);
  auto paraphrase = chat(ask("How do I reset my account password please?"));
  ASSERT_EQ(paraphrase.status, 200) << paraphrase.body;
  EXPECT_EQ(paraphrase.json()["hengshi"]["cache"], "semantic") << paraphrase.body;
  EXPECT_LT(paraphrase.json()["hengshi"]["cache_similarity"].get<double>(), 1.0);
  EXPECT_EQ(sim_requests(*small_), 1);
  auto negated = chat(ask("How do I not reset my account password?"));
  ASSERT_EQ(negated.status, 200);
  EXPECT_EQ(negated.json()["hengshi"]["cache"], "miss");
  EXPECT_EQ(sim_requests(*small_), 2);
}

TEST_F(GatewayCacheTest, AHardQuestionIsServedOnlyByItsExactText) {
  start_cached();
  // The hand score calls this hard (complexity_high: cloud-large). One word changes the answer
  // (three odd numbers sum to an odd one, four to an even one); to the n-gram embedder the two
  // questions are the same.
  const std::string hard =
      "Prove step by step that the sum of two odd numbers is even, then compare it with the proof "
      "for three odd numbers. Why?";
  std::string changed = hard;
  changed.replace(changed.find("three"), 5, "four");
  auto first = chat(ask(hard, {{"model", "auto"}}));
  ASSERT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(first.json()["hengshi"]["reason"], "complexity_high");
  EXPECT_EQ(first.json()["hengshi"]["figures"]["cache_semantic"], "off_hard");
  auto near_copy = chat(ask(changed, {{"model", "auto"}}));
  ASSERT_EQ(near_copy.status, 200) << near_copy.body;
  EXPECT_EQ(near_copy.json()["hengshi"]["reason"], "complexity_high");
  EXPECT_EQ(near_copy.json()["hengshi"]["cache"], "miss") << near_copy.body;
  auto again = chat(ask(hard, {{"model", "auto"}}));
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["hengshi"]["cache"], "exact");
  EXPECT_EQ(sim_requests(*large_), 2);
  // An easy question keeps the semantic tier.
  ASSERT_EQ(chat(ask("How do I reset my account password?", {{"model", "auto"}})).status, 200);
  auto paraphrase = chat(ask("How do I reset my account password please?", {{"model", "auto"}}));
  EXPECT_EQ(paraphrase.json()["hengshi"]["cache"], "semantic") << paraphrase.body;
}

// cache.verify_band: a hit just under the threshold is served only when cloud-small says yes
// (the sim plays the judge: [[sim:reply=...]] in the question makes it answer exactly that).
TEST_F(GatewayCacheTest, ABorderlineHitIsServedOnlyWhenTheCloudCheckAgrees) {
  start_cached("cache: {threshold: 0.97, verify_band: 0.4}\n");
  ASSERT_EQ(chat(ask("How do I reset my account password?")).status, 200);
  auto agreed = chat(ask("How do I reset my account password please? [[sim:reply=yes]]"));
  ASSERT_EQ(agreed.status, 200) << agreed.body;
  EXPECT_EQ(agreed.json()["hengshi"]["cache"], "semantic") << agreed.body;
  EXPECT_EQ(agreed.json()["hengshi"]["figures"]["cache_verify"], "yes");
  EXPECT_LT(agreed.json()["hengshi"]["cache_similarity"].get<double>(), 0.97);
  EXPECT_EQ(sim_requests(*small_), 2) << "the answer, then the check";
  // ("nah", not "no": a "no" in the question would trip the polarity guard before any check.)
  auto refused = chat(ask("How do I reset my account password please? [[sim:reply=nah]]"));
  ASSERT_EQ(refused.status, 200);
  EXPECT_EQ(refused.json()["hengshi"]["cache"], "miss");
  EXPECT_EQ(refused.json()["hengshi"]["figures"]["cache_verify"], "no");
  EXPECT_EQ(sim_requests(*small_), 4) << "the check, then the answer";
  const std::string metrics = admin_get("/metrics").body;
  EXPECT_NE(metrics.find(R"(hengshi_cache_verifications_total{verdict="yes"} 1)"), std::string::npos);
  EXPECT_NE(metrics.find(R"(hengshi_cache_verifications_total{verdict="no"} 1)"), std::string::npos);
}

TEST_F(GatewayCacheTest, AnInvalidatedTagForcesAFreshUpstreamCall) {
  start_cached();
  const json tagged = {{"hengshi", {{"tags", {"refund-policy"}}}}};
  ASSERT_EQ(chat(ask("What is the refund window?", tagged)).status, 200);
  ASSERT_EQ(chat(ask("What is the refund window?", tagged)).json()["hengshi"]["cache"], "exact");
  ASSERT_EQ(chat(ask("What are your opening hours?")).status, 200);
  auto removed = admin_post("/admin/cache/invalidate", {}, R"({"tags": ["refund-policy"]})");
  ASSERT_EQ(removed.status, 200) << removed.body;
  EXPECT_EQ(removed.json()["removed"], 1);
  auto fresh = chat(ask("What is the refund window?", tagged));
  EXPECT_EQ(fresh.json()["hengshi"]["cache"], "miss");
  EXPECT_EQ(chat(ask("What are your opening hours?")).json()["hengshi"]["cache"], "exact") << "untagged entry kept";
  EXPECT_EQ(sim_requests(*small_), 3);
  // Bad bodies get OpenAI's error shape; the admin token rules apply as for /admin/reload.
  for (const char* body : {"{}", R"({"tags": []})", R"({"tags": [1]})", R"({"all": false})", "not json"}) {
    auto refused = admin_post("/admin/cache/invalidate", {}, body);
    EXPECT_EQ(refused.status, 400) << body;
    EXPECT_TRUE(refused.json()["error"].contains("message")) << refused.body;
  }
  EXPECT_EQ(admin_post("/admin/cache/invalidate", {}, R"({"all": true})").json()["removed"], 2);
  EXPECT_EQ(chat(ask("What are your opening hours?")).json()["hengshi"]["cache"], "miss");
}

TEST_F(GatewayCacheTest, ACachedStreamReplaysAsAValidSseStream) {
  start_cached();
  auto first = chat(ask("Tell me about your return policy", {{"stream", true}}));
  ASSERT_EQ(first.status, 200) << first.body;
  std::string streamed;
  for (const auto& event : first.sse_events()) {
    if (event.contains("choices") && !event["choices"].empty() && event["choices"][0]["delta"].contains("content")) {
      streamed += event["choices"][0]["delta"]["content"].get<std::string>();
    }
  }
  ASSERT_FALSE(streamed.empty());
  auto second = chat(ask("Tell me about your return policy", {{"stream", true}}));
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(second.header("x-hengshi-cache"), "exact");
  const auto data = second.sse_data();
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.back(), "[DONE]");
  std::string replayed;
  int pieces = 0;
  for (const auto& event : second.sse_events()) {
    EXPECT_FALSE(event.contains("error")) << second.body;
    if (event.contains("choices") && !event["choices"].empty() && event["choices"][0]["delta"].contains("content")) {
      replayed += event["choices"][0]["delta"]["content"].get<std::string>();
      ++pieces;
    }
  }
  EXPECT_EQ(replayed, streamed);
  EXPECT_GT(pieces, 1) << "replayed in pieces, as a stream";
  EXPECT_EQ(second.sse_events().back()["hengshi"]["cache"], "exact");
  EXPECT_EQ(sim_requests(*small_), 1);
  // A stream and a JSON request share the entry.
  EXPECT_EQ(content_of(chat(ask("Tell me about your return policy"))), streamed);
}

TEST_F(GatewayCacheTest, WithTheCloudDownAStaleEntryAnswersAtTheLastResort) {
  start_cached("cache: {task_types: {news: {ttl_s: 1}}, stale_if_error_s: 3600}\n");
  // "auto": routed, so the plan ends in the last resort (a pinned pool has no other level).
  const json news = {{"model", "auto"}, {"hengshi", {{"task_type", "news"}}}};
  auto fresh = chat(ask("What changed in the shipping rules?", news));
  ASSERT_EQ(fresh.status, 200);
  const std::string cached = content_of(fresh);
  set_profile(*small_, {{"error_rate", 1.0}});
  set_profile(*large_, {{"error_rate", 1.0}});
  // Once the entry has expired (its TTL is 1 s) it is no fresh hit; with both pools failing the
  // last resort serves it stale instead of the canned reply.
  HttpResult stale;
  ASSERT_TRUE(wait_until(
      [&] {
        stale = chat(ask("What changed in the shipping rules?", news), {{"X-Hengshi-Deadline-Ms", "1500"}});
        return stale.status == 200 && stale.json()["hengshi"]["cache"] == "stale";
      },
      std::chrono::seconds(8)))
      << stale.body;
  const json meta = stale.json()["hengshi"];
  EXPECT_EQ(content_of(stale), cached);
  EXPECT_EQ(meta["answer_kind"], "stale");
  EXPECT_EQ(meta["level"], 4);
  EXPECT_EQ(stale.header("x-hengshi-degraded"), "stale_cache");
  EXPECT_EQ(stale.header("x-hengshi-cache"), "stale");
  // A question never cached gets the canned reply.
  auto canned = chat(ask("Something nobody asked before", news), {{"X-Hengshi-Deadline-Ms", "1500"}});
  EXPECT_EQ(canned.json()["hengshi"]["answer_kind"], "canned");
  EXPECT_EQ(canned.header("x-hengshi-degraded"), "last_resort");
}

TEST_F(GatewayCacheTest, PiiCacheControlAndTheRequestsOwnOptOutAreRespected) {
  start_cached();
  // PII is pinned to the edge and never stored.
  auto pii = chat(ask("my phone is 13912345678, where is my order?"));
  ASSERT_EQ(pii.status, 200);
  EXPECT_EQ(pii.json()["hengshi"]["cache"], "off");
  // no-store: neither served nor stored; no-cache: stored but not served.
  ASSERT_EQ(chat(ask("Do you ship abroad?"), {{"Cache-Control", "no-store"}}).status, 200);
  EXPECT_EQ(chat(ask("Do you ship abroad?")).json()["hengshi"]["cache"], "miss");
  auto no_cache = chat(ask("Do you ship abroad?"), {{"Cache-Control", "max-age=0, no-cache"}});
  EXPECT_EQ(no_cache.json()["hengshi"]["cache"], "miss");
  EXPECT_EQ(chat(ask("Do you ship abroad?")).json()["hengshi"]["cache"], "exact");
  // hengshi.cache: false opts out; a set seed or n > 1 is never cached.
  EXPECT_EQ(chat(ask("Do you ship abroad?", {{"hengshi", {{"cache", false}}}})).json()["hengshi"]["cache"], "off");
  EXPECT_EQ(chat(ask("Do you ship abroad?", {{"seed", 7}})).json()["hengshi"]["cache"], "off");
  auto refused = chat(ask("Do you ship abroad?", {{"hengshi", {{"cache", "no"}}}}));
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(refused.json()["error"]["param"], "hengshi.cache");
  const auto ready = get("/readyz").json();
  EXPECT_EQ(ready["cache"]["redis"], "off");
}

#ifdef HENGSHI_HAVE_LLAMA
// cache.embedder llama: a GGUF embedding model (here a generated one, random weights, mean pooling)
// gives the semantic tier its vectors through llama.cpp.
TEST_F(GatewayCacheTest, AGgufEmbeddingModelGivesTheSemanticTierItsVectors) {
  const std::string model = temp_path("embedding.gguf");
  auto made = ChildProcess::run(
      {binary_path("src/cli/hengshi"), "make-test-model", "--out", model, "--pooling", "mean"});
  ASSERT_EQ(made.exit_code, 0) << made.output;
  start_cached("cache: {embedder: llama, embedding_model: " + model + "}\n");
  ASSERT_EQ(chat(ask("Where do I change my delivery address?")).status, 200);
  const json stats = admin_get("/admin/cache/stats").json();
  EXPECT_EQ(stats["embedder"].get<std::string>().rfind("llama-", 0), 0u) << stats.dump();
  EXPECT_EQ(stats["index"]["entries"], 1) << "the answer's question was embedded and indexed";
  EXPECT_EQ(chat(ask("where do I change my delivery address")).json()["hengshi"]["cache"], "exact");
  std::remove(model.c_str());
}
#endif

}  // namespace
}  // namespace hengshi::testing
