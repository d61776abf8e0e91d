// In-process tests of the tenants' parts: hashed API keys and the keys file, the quota
// bookkeeping with a test clock, and their config fields.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "api_keys.h"
#include "sinew/harness/config.h"
#include "sinew/testing/subprocess.h"
#include "tenant_quotas.h"
#include "test_util.h"

namespace sinew::harness {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A clock the test moves by hand.
struct TestClock {
  std::chrono::steady_clock::time_point now{std::chrono::seconds(1000)};
  TenantQuotas::Clock fn() {
    return [this] { return now; };
  }
};

TEST(ApiKeysTest, HashIsTheSha256OfTheKey) {
  // The SHA-256 test vector of "abc" (FIPS 180-2).
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HashApiKey("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ApiKeysTest, HashedAndPlaintextKeysFindTheirTenantAndNothingElse) {
  HarnessConfig c;
  c.api_keys = {{HashApiKey("alpha-key"), "tenant-a"}, {"beta-key", "tenant-b"}};
  auto keys = ApiKeys::Create(c);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  auto a = (*keys)->Match("alpha-key");
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->tenant, "tenant-a");
  EXPECT_EQ(a->key_id, Sha256Hex("alpha-key").substr(0, kKeyIdDigits));
  auto b = (*keys)->Match("beta-key");  // plaintext in the config: still accepted
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->tenant, "tenant-b");
  EXPECT_FALSE((*keys)->Match("alpha-ke").has_value());
  EXPECT_FALSE((*keys)->Match("").has_value());
  // The stored hash itself is not a key.
  EXPECT_FALSE((*keys)->Match(HashApiKey("alpha-key")).has_value());
}

TEST(ApiKeysTest, MalformedHashesAreRefusedWithoutQuotingTheEntry) {
  size_t plaintext = 0;
  auto short_hash = ParseKeyTable({{"sha256:abcd", "t"}}, true, "config.api_keys", &plaintext);
  ASSERT_FALSE(short_hash.ok());
  EXPECT_NE(short_hash.status().message().find("64 hex digits"), std::string::npos);
  EXPECT_EQ(short_hash.status().message().find("abcd"), std::string::npos)
      << short_hash.status().message();
  auto not_hex =
      ParseKeyTable({{"sha256:" + std::string(64, 'g'), "t"}}, true, "config.api_keys", &plaintext);
  EXPECT_FALSE(not_hex.ok());
  auto plain_in_file = ParseKeyTable({{"secret-plaintext", "t"}}, false, "keys file", &plaintext);
  ASSERT_FALSE(plain_in_file.ok());
  EXPECT_EQ(plain_in_file.status().message().find("secret-plaintext"), std::string::npos);
  auto no_tenant = ParseKeyTable({{HashApiKey("k"), ""}}, true, "config.api_keys", &plaintext);
  EXPECT_FALSE(no_tenant.ok());
}

TEST(ApiKeysTest, TheKeysFileRotatesWithoutARestart) {
  testing::TempDir dir;
  const std::string path = dir.Sub("keys.json");
  // Replace the file as an operator should: write a new one, rename it over.
  auto replace = [&](const std::string& text) {
    test::WriteFile(path + ".new", text);
    std::filesystem::rename(path + ".new", path);
  };
  replace(R"({")" + HashApiKey("old-key") + R"(": "tenant-a"})");
  HarnessConfig c;
  c.api_keys_file = path;
  auto keys = ApiKeys::Create(c);
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  EXPECT_TRUE((*keys)->Match("old-key").has_value());
  EXPECT_FALSE((*keys)->Match("new-key").has_value());
  // The rotation window: both keys are valid.
  replace(R"({")" + HashApiKey("old-key") + R"(": "tenant-a", ")" + HashApiKey("new-key") +
          R"(": "tenant-a"})");
  EXPECT_TRUE((*keys)->Match("old-key").has_value());
  EXPECT_TRUE((*keys)->Match("new-key").has_value());
  // The old key removed.
  replace(R"({")" + HashApiKey("new-key") + R"(": "tenant-a"})");
  EXPECT_FALSE((*keys)->Match("old-key").has_value());
  EXPECT_EQ((*keys)->Match("new-key")->tenant, "tenant-a");
  // A broken file keeps the keys read before.
  replace("{not json");
  EXPECT_TRUE((*keys)->Match("new-key").has_value());
  EXPECT_FALSE(((*keys)->Reload()).ok());
  EXPECT_TRUE((*keys)->Match("new-key").has_value());
}

TEST(ApiKeysTest, AMissingOrPlaintextKeysFileIsAStartError) {
  testing::TempDir dir;
  HarnessConfig c;
  c.api_keys_file = dir.Sub("absent.json");
  EXPECT_EQ(ApiKeys::Create(c).status().code(), StatusCode::kNotFound);
  test::WriteFile(dir.Sub("plain.json"), R"({"plain-key": "t"})");
  c.api_keys_file = dir.Sub("plain.json");
  EXPECT_EQ(ApiKeys::Create(c).status().code(), StatusCode::kInvalidArgument);
}

TEST(TenantQuotasTest, RequestBucketRefusesWithRetryAfterAndRefills) {
  TestClock clock;
  TenantQuotaConfig q;
  q.requests_per_second = 2;  // a bucket of 2
  TenantQuotas quotas({{"a", q}}, clock.fn());
  EXPECT_FALSE(quotas.TakeRequest("a").has_value());
  EXPECT_FALSE(quotas.TakeRequest("a").has_value());
  auto refused = quotas.TakeRequest("a");
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(*refused, 1u);  // half a second, rounded up
  // Other tenants are not limited.
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(quotas.TakeRequest("b").has_value());
  clock.now += milliseconds(500);  // one request's worth
  EXPECT_FALSE(quotas.TakeRequest("a").has_value());
  EXPECT_TRUE(quotas.TakeRequest("a").has_value());
  clock.now += seconds(10);  // refills to the bucket's size only
  EXPECT_FALSE(quotas.TakeRequest("a").has_value());
  EXPECT_FALSE(quotas.TakeRequest("a").has_value());
  EXPECT_TRUE(quotas.TakeRequest("a").has_value());
}

TEST(TenantQuotasTest, SlowRatesAskForWholeSecondsRoundedUp) {
  TestClock clock;
  TenantQuotaConfig q;
  q.requests_per_second = 0.25;  // one request every 4 s, a bucket of 1
  TenantQuotas quotas({{"a", q}}, clock.fn());
  EXPECT_FALSE(quotas.TakeRequest("a").has_value());
  EXPECT_EQ(quotas.TakeRequest("a").value_or(0), 4u);
  clock.now += milliseconds(1500);
  EXPECT_EQ(quotas.TakeRequest("a").value_or(0), 3u);  // 2.5 s left
  clock.now += milliseconds(2500);
  EXPECT_FALSE(quotas.TakeRequest("a").has_value());
}

TEST(TenantQuotasTest, TokensSlideOutOfTheMinute) {
  TestClock clock;
  TenantQuotaConfig q;
  q.tokens_per_minute = 100;
  TenantQuotas quotas({{"a", q}}, clock.fn());
  quotas.AddTokens("a", 60);
  EXPECT_FALSE(quotas.TokensRetryAfter("a").has_value());
  clock.now += seconds(20);
  quotas.AddTokens("a", 50);  // 110 in the minute
  EXPECT_EQ(quotas.TokensInLastMinute("a"), 110u);
  // Under again when the first 60 age out, 40 s from now.
  EXPECT_EQ(quotas.TokensRetryAfter("a").value_or(0), 40u);
  clock.now += milliseconds(39500);
  EXPECT_EQ(quotas.TokensRetryAfter("a").value_or(0), 1u);
  clock.now += milliseconds(500);
  EXPECT_FALSE(quotas.TokensRetryAfter("a").has_value());
  EXPECT_EQ(quotas.TokensInLastMinute("a"), 50u);
  // Unlimited tenants are never refused.
  quotas.AddTokens("b", 1000000);
  EXPECT_FALSE(quotas.TokensRetryAfter("b").has_value());
}

TEST(TenantQuotasTest, SandboxesCountSessionsOnce) {
  TenantQuotaConfig q;
  q.max_sandboxes = 2;
  TenantQuotas quotas({{"a", q}});
  EXPECT_TRUE(quotas.AcquireSandbox("a", "s1"));
  EXPECT_TRUE(quotas.AcquireSandbox("a", "s1"));  // the same session again (a fresh sandbox)
  EXPECT_TRUE(quotas.AcquireSandbox("a", "s2"));
  EXPECT_FALSE(quotas.AcquireSandbox("a", "s3"));
  EXPECT_EQ(quotas.SandboxesHeld("a"), 2u);
  EXPECT_TRUE(quotas.AcquireSandbox("a", "s4", /*force=*/true));  // resumed holding one
  EXPECT_EQ(quotas.SandboxesHeld("a"), 3u);
  quotas.ReleaseSandbox("a", "s1");
  quotas.ReleaseSandbox("a", "s4");
  EXPECT_TRUE(quotas.AcquireSandbox("a", "s3"));
  EXPECT_TRUE(quotas.AcquireSandbox("other", "x"));
}

TEST(TenantConfigTest, TenantsAndTheKeysFileParse) {
  auto c =
      ParseConfig(R"({"store": {"address": "127.0.0.1:1"}, "api_keys_file": "/etc/sinew/keys.json",
    "tenants": {"a": {"max_concurrent_sessions": 3, "max_sandboxes": 2, "tokens_per_minute": 50000,
                      "requests_per_second": 2.5}, "b": {}},
    "models": {"m": {"kind": "scripted", "script": "/dev/null"}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->api_keys.empty());
  EXPECT_EQ(c->api_keys_file, "/etc/sinew/keys.json");
  EXPECT_EQ(c->tenants.at("a").max_concurrent_sessions, 3u);
  EXPECT_EQ(c->tenants.at("a").max_sandboxes, 2u);
  EXPECT_EQ(c->tenants.at("a").tokens_per_minute, 50000u);
  EXPECT_DOUBLE_EQ(c->tenants.at("a").requests_per_second, 2.5);
  EXPECT_EQ(c->tenants.at("b").requests_per_second, 0);  // unlimited
}

// The sandbox API's quotas (docs/sandbox-api.md).
TEST(TenantConfigTest, SandboxApiQuotasParseAndRefuseNegatives) {
  const std::string head =
      R"({"store": {"address": "127.0.0.1:1"}, "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, )"
      R"("api_keys": {"k": "t"}, )";
  auto c = ParseConfig(head + R"("tenants": {"a": {"max_api_sandboxes": 4, "sandbox_creations_per_minute": 30}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tenants.at("a").max_api_sandboxes, 4u);
  EXPECT_EQ(c->tenants.at("a").sandbox_creations_per_minute, 30u);
  auto bad = ParseConfig(head + R"("tenants": {"a": {"max_api_sandboxes": -1}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("config.tenants.a.max_api_sandboxes"), std::string::npos)
      << bad.status().message();
}

// The sandbox API's resource quotas (docs/sandbox-api.md, "Quotas"): whole non-negative
// numbers; anything else refuses the config, naming the field.
TEST(TenantConfigTest, SandboxResourceQuotasParseAndRefuseMalformedValues) {
  const std::string head =
      R"({"store": {"address": "127.0.0.1:1"}, "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, )"
      R"("api_keys": {"k": "t"}, )";
  auto c = ParseConfig(head + R"("tenants": {"a": {"sandbox_memory_bytes": 1073741824, )"
                              R"("sandbox_cpu_millis": 2500, "snapshot_bytes": 5000000}}})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tenants.at("a").sandbox_memory_bytes, 1073741824u);
  EXPECT_EQ(c->tenants.at("a").sandbox_cpu_millis, 2500u);
  EXPECT_EQ(c->tenants.at("a").snapshot_bytes, 5000000u);
  for (const std::string field : {"sandbox_memory_bytes", "sandbox_cpu_millis", "snapshot_bytes"}) {
    for (const std::string value : {"-1", "1.5", "\"1G\"", "true", "1e300"}) {
      auto bad = ParseConfig(head + R"("tenants": {"a": {")" + field + "\": " + value + "}}}");
      ASSERT_FALSE(bad.ok()) << field << " " << value;
      EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(bad.status().message().find("config.tenants.a." + field), std::string::npos)
          << bad.status().message();
    }
  }
}

TEST(TenantConfigTest, ErrorsNameTheField) {
  const std::string head =
      R"({"store": {"address": "127.0.0.1:1"}, "models": {"m": {"kind": "scripted", "script": "/dev/null"}}, )";
  auto expect_error = [&](const std::string& rest, const std::string& needle) {
    auto c = ParseConfig(head + rest + "}");
    ASSERT_FALSE(c.ok()) << rest;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
  };
  expect_error(R"("api_keys": {"k": "t"}, "tenants": {"a": {"max_sessions": 1}})",
               "config.tenants.a");
  expect_error(R"("api_keys": {"k": "t"}, "tenants": {"a": {"requests_per_second": -1}})",
               "requests_per_second");
  expect_error(R"("api_keys": {"k": "t"}, "tenants": {"a": 5})",
               "config.tenants.a must be an object");
  expect_error(R"("api_keys": {"sha256:00": "t"})", "64 hex digits");
  expect_error(R"("api_keys": {})", "api_keys_file");
}

}  // namespace
}  // namespace sinew::harness
