// Bad input never crashes the gateway: every case gets an OpenAI-style error with the right
// status, and the server keeps serving afterwards.
#include "integration/gateway_fixture.h"

namespace hengshi::testing {
namespace {

class GatewayBadInputTest : public GatewayFixture {
 protected:
  void SetUp() override { start(); }

  void expect_error(const HttpResult& result, int status, const std::string& code) {
    EXPECT_EQ(result.status, status) << result.body;
    auto body = nlohmann::json::parse(result.body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << result.body;
    ASSERT_TRUE(body.contains("error")) << result.body;
    EXPECT_EQ(body["error"]["code"], code) << result.body;
    EXPECT_TRUE(body["error"]["message"].is_string());
    EXPECT_TRUE(body["error"]["type"].is_string());
  }
};

TEST_F(GatewayBadInputTest, MalformedRequestsGet400WithTheOffendingField) {
  expect_error(chat("{\"messages\": [oops"), 400, "invalid_json");
  expect_error(chat(R"({"model":"cloud-small"})"), 400, "missing_required_parameter");
  expect_error(chat(R"({"messages":[]})"), 400, "invalid_value");
  expect_error(chat(R"({"messages":{"role":"user"}})"), 400, "invalid_type");
  auto role = chat(R"({"messages":[{"role":"robot","content":"hi"}]})");
  expect_error(role, 400, "invalid_value");
  EXPECT_EQ(role.json()["error"]["param"], "messages[0].role");
  expect_error(chat(R"({"messages":[{"role":"user","content":"x"}],"stream":"true"})"), 400, "invalid_type");
  expect_error(chat(""), 400, "invalid_json");
  EXPECT_EQ(sim_stats(*small_)["requests_total"], 0) << "nothing invalid may reach an upstream";
  expect_gateway_alive();
}

TEST_F(GatewayBadInputTest, WrongContentTypeIs415) {
  HttpRequest request{"POST", "/v1/chat/completions", user_message("cloud-small", "hi"), "text/plain", {}};
  expect_error(http_call(gateway_->host(), gateway_->port(), request), 415, "unsupported_media_type");
  HttpRequest with_charset{"POST", "/v1/chat/completions", user_message("cloud-small", "hi"),
                           "application/json; charset=utf-8", {}};
  EXPECT_EQ(http_call(gateway_->host(), gateway_->port(), with_charset).status, 200);
  // Media types compare without case (RFC 9110 8.3.1); a longer or shorter name is another type.
  HttpRequest upper{"POST", "/v1/chat/completions", user_message("cloud-small", "hi"), "Application/JSON ; q=1", {}};
  EXPECT_EQ(http_call(gateway_->host(), gateway_->port(), upper).status, 200);
  for (const char* other : {"application/jsonx", "application/jso", "application/json-seq"}) {
    HttpRequest near{"POST", "/v1/chat/completions", user_message("cloud-small", "hi"), other, {}};
    expect_error(http_call(gateway_->host(), gateway_->port(), near), 415, "unsupported_media_type");
  }
}

TEST_F(GatewayBadInputTest, UnknownPathIs404AndWrongMethodIs405) {
  expect_error(get("/v1/nothing-here"), 404, "not_found");
  auto wrong = http_call(gateway_->host(), gateway_->port(), {"GET", "/v1/chat/completions", "", "", {}});
  expect_error(wrong, 405, "method_not_allowed");
  EXPECT_EQ(wrong.header("allow"), "POST");
  expect_error(http_call(gateway_->host(), gateway_->port(), {"DELETE", "/healthz", "", "", {}}), 405,
               "method_not_allowed");
  expect_gateway_alive();
}

TEST_F(GatewayBadInputTest, BodyOverTheLimitIs413) {
  std::string huge = user_message("cloud-small", std::string(70 * 1024, 'x'));  // limit is 64 KiB
  expect_error(chat(huge), 413, "body_too_large");
  // Chunked upload with no Content-Length: the limit still holds while reading.
  HttpConnection connection(gateway_->host(), gateway_->port());
  std::string chunk(40 * 1024, 'y');
  std::string raw = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 2; ++i) {
    char size[16];
    std::snprintf(size, sizeof(size), "%zx\r\n", chunk.size());
    raw += size + chunk + "\r\n";
  }
  raw += "0\r\n\r\n";
  expect_error(connection.send_raw(raw), 413, "body_too_large");
  expect_gateway_alive();
}

TEST_F(GatewayBadInputTest, GarbageHttpIs400AndServerStaysUp) {
  HttpConnection connection(gateway_->host(), gateway_->port());
  auto result = connection.send_raw("THIS IS NOT HTTP\r\n\r\n");
  expect_error(result, 400, "bad_http");
  expect_gateway_alive();
}

TEST_F(GatewayBadInputTest, ClientThatDisconnectsMidRequestBodyDoesNotHurtTheServer) {
  {
    HttpConnection connection(gateway_->host(), gateway_->port());
    connection.send_raw_no_reply(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n{\"messages\":");
  }
  expect_gateway_alive();
  EXPECT_EQ(sim_stats(*small_)["requests_total"], 0);
}

TEST_F(GatewayBadInputTest, ClientThatDisconnectsWhileWaitingCancelsTheUpstreamCall) {
  {
    HttpConnection connection(gateway_->host(), gateway_->port());
    connection.send_raw_no_reply(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: " +
        std::to_string(user_message("cloud-small", "[[sim:hang]]").size()) + "\r\n\r\n" +
        user_message("cloud-small", "[[sim:hang]]"));
    ASSERT_TRUE(wait_until([&] { return sim_stats(*small_)["in_flight"] == 1; }));
  }  // the client goes away while the upstream hangs
  EXPECT_TRUE(wait_until([&] { return sim_stats(*small_)["client_disconnects"] == 1; }))
      << "the gateway must close the upstream connection when its client leaves";
  EXPECT_TRUE(wait_until([&] {
    return admin_get("/metrics").body.find("hengshi_client_disconnects_total{phase=\"waiting_upstream\"} 1") !=
           std::string::npos;
  }));
  // Ended by the cancel, not by its time limit (which would also close the upstream connection).
  const std::string cancelled =
      "hengshi_chain_attempts_total{source=\"cloud-small\",outcome=\"cancelled\"} 1";
  EXPECT_TRUE(wait_until([&] {
    return admin_get("/metrics").body.find(cancelled) != std::string::npos;
  })) << admin_get("/metrics").body;
  expect_gateway_alive();
}

// The client-gone watch peeks at the socket while the upstream call waits: bytes of a pipelined
// next request must end the watch, not cancel the call as a close would.
TEST_F(GatewayBadInputTest, APipelinedRequestWhileTheFirstWaitsUpstreamDoesNotCancelIt) {
  auto raw = [](const std::string& body) {
    return "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  HttpConnection connection(gateway_->host(), gateway_->port());
  connection.send_raw_no_reply(raw(user_message("cloud-small", "first [[sim:slow=400]]")));
  ASSERT_TRUE(wait_until([&] { return sim_stats(*small_)["in_flight"] == 1; }));
  connection.send_raw_no_reply(raw(user_message("cloud-small", "second")));  // while the first waits

  auto first = connection.read_response();
  auto second = connection.read_response();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_NE(first.body.find("first"), std::string::npos) << first.body;
  EXPECT_EQ(second.status, 200) << second.body;
  EXPECT_NE(second.body.find("second"), std::string::npos) << second.body;
  EXPECT_EQ(sim_stats(*small_)["client_disconnects"], 0);
  EXPECT_EQ(admin_get("/metrics").body.find("hengshi_client_disconnects_total{phase=\"waiting_upstream\"} 1"),
            std::string::npos);
}

TEST_F(GatewayBadInputTest, ClientThatDisconnectsMidStreamCancelsTheUpstreamStream) {
  // A slow stream: the first chunks arrive, then the client leaves.
  ASSERT_EQ(http_call(small_->host(), small_->port(),
                      {"POST", "/admin/profile", R"({"tokens_per_s": 20, "output_tokens": {"min": 200, "max": 200}})",
                       "application/json", {}})
                .status,
            200);
  {
    HttpConnection connection(gateway_->host(), gateway_->port());
    connection.send_and_close_after_head(
        {"POST", "/v1/chat/completions", user_message("cloud-small", "long story", true), "application/json", {}});
  }
  EXPECT_TRUE(wait_until([&] { return sim_stats(*small_)["client_disconnects"] == 1; }));
  EXPECT_TRUE(wait_until([&] { return sim_stats(*small_)["in_flight"] == 0; }));
  expect_gateway_alive();
}

}  // namespace
}  // namespace hengshi::testing
