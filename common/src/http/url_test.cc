// URLs, percent-decoding and HTTP dates (sinew/http/url.h).
#include "sinew/http/url.h"

#include <gtest/gtest.h>

namespace sinew::http {
namespace {

TEST(UrlTest, ParsesTheSchemeHostUserAndPortWithTheSchemesDefault) {
  auto a = ParseUrl("https://API.example.com/v1/x?q=1");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->scheme, "https");
  EXPECT_EQ(a->host, "API.example.com");
  EXPECT_EQ(a->port, "443");
  EXPECT_EQ(a->user, "");
  auto b = ParseUrl("http://me@127.0.0.1:8081/");
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->scheme, "http");
  EXPECT_EQ(b->user, "me");
  EXPECT_EQ(b->port, "8081");
  auto bad = ParseUrl("http://exa mple.com:99999/");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("does not parse"), std::string::npos);
}

TEST(UrlTest, PercentDecodingKeepsPlusAndMalformedEscapes) {
  EXPECT_EQ(PercentDecode("a%20b%2Fc"), "a b/c");
  EXPECT_EQ(PercentDecode("a+b"), "a+b");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%zz"), "%zz");
}

TEST(UrlTest, ReadsTheThreeHttpDateFormsAndRefusesOthers) {
  EXPECT_EQ(ParseHttpDate("Sun, 06 Nov 1994 08:49:37 GMT"), std::optional<std::time_t>(784111777));
  EXPECT_EQ(ParseHttpDate("Sunday, 06-Nov-94 08:49:37 GMT"), std::optional<std::time_t>(784111777));
  EXPECT_EQ(ParseHttpDate("Sun Nov  6 08:49:37 1994"), std::optional<std::time_t>(784111777));
  EXPECT_EQ(ParseHttpDate("not a date"), std::nullopt);
}

}  // namespace
}  // namespace sinew::http
