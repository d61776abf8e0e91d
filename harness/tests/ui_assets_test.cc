// The console's files as the harness serves them (ServeUi): paths, cache headers, the
// security headers, and what is refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ui_assets.h"

namespace sinew::harness {
namespace {

ApiRequest Get(const std::string& target) {
  ApiRequest r;
  r.method = "GET";
  r.target = target;
  return r;
}

std::string Header(const ApiResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers) {
    if (k == name) return v;
  }
  return "";
}

TEST(UiAssetsTest, ThePageNamesThisBuildsFilesAndIsNotCached) {
  for (const char* target : {"/ui/", "/ui/index.html", "/ui/?x=1"}) {
    ApiResponse r = ServeUi(Get(target));
    ASSERT_EQ(r.status, 200) << target;
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
    EXPECT_EQ(Header(r, "Cache-Control"), "no-cache");
    EXPECT_EQ(r.body.find("{{BUILD}}"), std::string::npos);
    EXPECT_NE(r.body.find(std::string(kUiBuildId) + "/app.js"), std::string::npos);
    EXPECT_NE(Header(r, "Content-Security-Policy").find("script-src 'self'"), std::string::npos);
    EXPECT_EQ(Header(r, "X-Content-Type-Options"), "nosniff");
  }
}

TEST(UiAssetsTest, EveryFileIsServedWithItsTypeAndCachedUnderThisBuildsId) {
  ASSERT_GT(kUiFileCount, 5u);
  EXPECT_EQ(std::string(kUiBuildId).size(), 12u);
  for (size_t i = 0; i < kUiFileCount; ++i) {
    const std::string name = kUiFiles[i].name;
    if (name == "index.html") continue;
    ApiResponse r = ServeUi(Get("/ui/" + std::string(kUiBuildId) + "/" + name));
    ASSERT_EQ(r.status, 200) << name;
    EXPECT_EQ(r.body,
              std::string(reinterpret_cast<const char*>(kUiFiles[i].data), kUiFiles[i].size));
    EXPECT_EQ(Header(r, "Cache-Control"), "public, max-age=31536000, immutable") << name;
    if (name.ends_with(".js")) {
      EXPECT_EQ(r.content_type, "text/javascript; charset=utf-8");
    }
    if (name.ends_with(".css")) {
      EXPECT_EQ(r.content_type, "text/css; charset=utf-8");
    }
    // Another build's URL still gets the file, but not for keeps.
    ApiResponse old = ServeUi(Get("/ui/0123456789ab/" + name));
    EXPECT_EQ(old.status, 200);
    EXPECT_EQ(Header(old, "Cache-Control"), "no-cache");
  }
}

TEST(UiAssetsTest, OnlyTheTablesFilesAndOnlyGet) {
  const std::string id = kUiBuildId;
  for (const std::string& target :
       std::vector<std::string>{"/ui/app.js", "/ui/" + id + "/nope.js", "/ui/" + id + "/../app.js",
                                "/ui/" + id + "/index.html", "/ui/" + id + "/test/stack.mjs",
                                "/ui/" + id + "/embed_assets.cmake", "/ui/" + id + "/"}) {
    ApiResponse r = ServeUi(Get(target));
    EXPECT_EQ(r.status, 404) << target;
    EXPECT_EQ(r.content_type, "application/json");
    EXPECT_NE(r.body.find(R"("code":"not_found")"), std::string::npos) << r.body;
    EXPECT_FALSE(Header(r, "Content-Security-Policy").empty());
  }
  ApiRequest post = Get("/ui/");
  post.method = "POST";
  ApiResponse r = ServeUi(post);
  EXPECT_EQ(r.status, 405);
  EXPECT_EQ(Header(r, "Allow"), "GET");
  EXPECT_NE(r.body.find(R"("code":"method_not_allowed")"), std::string::npos) << r.body;
  // A method that is not UTF-8 (found by harness_request_fuzz) still gets a JSON error.
  post.method = "DELET\xe5\xe5";
  ApiResponse odd = ServeUi(post);
  EXPECT_EQ(odd.status, 405);
  boost::system::error_code ec;
  auto parsed = boost::json::parse(odd.body, ec);
  EXPECT_FALSE(ec) << odd.body;
  ApiResponse bare = ServeUi(Get("/ui"));
  EXPECT_EQ(bare.status, 308);
  EXPECT_EQ(Header(bare, "Location"), "/ui/");
  EXPECT_TRUE(IsUiPath("/ui"));
  EXPECT_TRUE(IsUiPath("/ui/x"));
  EXPECT_FALSE(IsUiPath("/uix"));
  EXPECT_FALSE(IsUiPath("/v1/ui/"));
}

}  // namespace
}  // namespace sinew::harness
