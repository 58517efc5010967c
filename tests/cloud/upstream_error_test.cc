#include "cloud/upstream_error.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "support/text_checks.h"

namespace hengshi::cloud {
namespace {

UpstreamError make(UpstreamErrorKind kind) {
  UpstreamError error;
  error.kind = kind;
  error.upstream = "primary";
  error.message = "detail";
  return error;
}

TEST(UpstreamError, MapsEachKindToStatusAndCode) {
  struct Case {
    UpstreamErrorKind kind;
    int status;
    const char* code;
  };
  const Case cases[] = {
      {UpstreamErrorKind::connect_failed, 502, "upstream_connect_failed"},
      {UpstreamErrorKind::bad_response, 502, "upstream_bad_response"},
      {UpstreamErrorKind::closed_early, 502, "upstream_closed_early"},
      {UpstreamErrorKind::server_error, 502, "upstream_server_error"},
      {UpstreamErrorKind::connect_timeout, 504, "upstream_connect_timeout"},
      {UpstreamErrorKind::ttft_timeout, 504, "upstream_ttft_timeout"},
      {UpstreamErrorKind::total_timeout, 504, "upstream_timeout"},
      {UpstreamErrorKind::rate_limited, 429, "upstream_rate_limited"},
      {UpstreamErrorKind::overloaded, 429, "pool_overloaded"},
      {UpstreamErrorKind::cancelled, 499, "client_closed_request"},
      {UpstreamErrorKind::auth_failed, 502, "upstream_auth_failed"},
  };
  for (const auto& c : cases) {
    ApiError api = make(c.kind).to_api_error();
    EXPECT_EQ(api.status, c.status) << to_string(c.kind);
    EXPECT_EQ(api.code, c.code) << to_string(c.kind);
    EXPECT_NE(api.message.find("primary"), std::string::npos) << api.message;
  }
}

TEST(UpstreamError, ClientErrorPassesTheUpstreamStatusAndMessageThrough) {
  UpstreamError error = make(UpstreamErrorKind::client_error);
  error.http_status = 422;
  error.upstream_body =
      R"({"error":{"message":"max_tokens is too large","type":"invalid_request_error",)"
      R"("code":"context_length_exceeded","param":"max_tokens"}})";
  ApiError api = error.to_api_error();
  EXPECT_EQ(api.status, 422);
  EXPECT_EQ(api.message, "max_tokens is too large");
  EXPECT_EQ(api.type, "invalid_request_error");
  EXPECT_EQ(api.code, "context_length_exceeded");
  EXPECT_EQ(api.param, "max_tokens");
}

TEST(UpstreamError, ClientErrorWithNonJsonBodyKeepsTheText) {
  UpstreamError error = make(UpstreamErrorKind::client_error);
  error.http_status = 404;
  error.upstream_body = "no such route";
  ApiError api = error.to_api_error();
  EXPECT_EQ(api.status, 404);
  EXPECT_EQ(api.message, "no such route");
  EXPECT_FALSE(api.code.empty());
}

TEST(UpstreamError, Retryable) {
  for (auto kind : {UpstreamErrorKind::connect_failed, UpstreamErrorKind::connect_timeout,
                    UpstreamErrorKind::ttft_timeout, UpstreamErrorKind::total_timeout,
                    UpstreamErrorKind::rate_limited, UpstreamErrorKind::server_error,
                    UpstreamErrorKind::closed_early, UpstreamErrorKind::overloaded}) {
    EXPECT_TRUE(make(kind).retryable()) << to_string(kind);
  }
  for (auto kind : {UpstreamErrorKind::client_error, UpstreamErrorKind::bad_response,
                    UpstreamErrorKind::cancelled, UpstreamErrorKind::auth_failed}) {
    EXPECT_FALSE(make(kind).retryable()) << to_string(kind);
  }
}

TEST(UpstreamError, NothingIsRetryableOnceBytesReachedTheClient) {
  for (auto kind : {UpstreamErrorKind::closed_early, UpstreamErrorKind::total_timeout,
                    UpstreamErrorKind::server_error}) {
    UpstreamError error = make(kind);
    error.after_first_byte = true;
    EXPECT_FALSE(error.retryable()) << to_string(kind);
  }
}

TEST(UpstreamError, KindNames) {
  EXPECT_STREQ(to_string(UpstreamErrorKind::ttft_timeout), "ttft_timeout");
  EXPECT_STREQ(to_string(UpstreamErrorKind::cancelled), "cancelled");
  EXPECT_STREQ(to_string(UpstreamErrorKind::auth_failed), "auth_failed");
}

using hengshi::testing::dumps_strictly;  // support/text_checks.h

TEST(UpstreamError, AuthFailureKeepsTheUpstreamsMessageOutOfTheResponse) {
  UpstreamError error = make(UpstreamErrorKind::auth_failed);
  error.http_status = 401;
  error.message = "HTTP 401";
  error.upstream_body = R"({"error":{"message":"Incorrect API key provided: sk-abc***"}})";
  ApiError api = error.to_api_error();
  EXPECT_EQ(api.status, 502);
  EXPECT_EQ(api.code, "upstream_auth_failed");
  EXPECT_EQ(api.message.find("sk-abc"), std::string::npos) << api.message;
  EXPECT_EQ(api.message.find("Incorrect"), std::string::npos) << api.message;
}

TEST(UpstreamError, NonJsonBodyCutMidCharacterBecomesValidUtf8) {
  UpstreamError error = make(UpstreamErrorKind::client_error);
  error.http_status = 400;
  error.upstream_body = "bad \xE4\xBD\xA0\xE5\xA5";  // "你" then the first two bytes of "好"
  ApiError api = error.to_api_error();
  EXPECT_EQ(api.message, "bad \xE4\xBD\xA0\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(dumps_strictly(api.message));

  error.upstream_body = std::string("\xFF\xFE\xC0\xAF ok", 6);
  EXPECT_TRUE(dumps_strictly(error.to_api_error().message));
}

TEST(UpstreamError, MessagesQuotingInvalidUtf8AreMadeValid) {
  for (auto kind : {UpstreamErrorKind::bad_response, UpstreamErrorKind::server_error,
                    UpstreamErrorKind::closed_early}) {
    UpstreamError error = make(kind);
    error.message = "response is not JSON: \x80\xC3";
    EXPECT_TRUE(dumps_strictly(error.to_api_error().message)) << to_string(kind);
  }
}

}  // namespace
}  // namespace hengshi::cloud
