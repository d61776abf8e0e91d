// A real sinew-store and sinew-harness on loopback, with scripted models (test doubles
// of language models) and an HTTP server in the test as the target of http_request.
#pragma once

#include <gtest/gtest.h>

#include "test_util.h"

namespace sinew::harness::test {

inline constexpr const char* kKeyA = "key-tenant-a";
inline constexpr const char* kKeyB = "key-tenant-b";
inline constexpr const char* kSecret = "tok-7f3a9c-very-secret";

class ApiFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    target_ = std::make_unique<TestHttpServer>([](const TestHttpServer::Request& r) {
      TestHttpServer::Response resp;
      resp.content_type = "text/plain";
      auto it = r.headers.find("authorization");
      resp.body = "echo " + r.method + " " + r.target + " auth=" + (it == r.headers.end() ? "" : it->second);
      return resp;
    });
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    const std::string target = target_->url();
    WriteFile(dir_.Sub("basic.json"), R"({"responses": [
      {"text": "Fetching.", "tool_calls": [{"name": "http_request", "input": {"url": ")" + target + R"(/data"}}]},
      {"text": "Done: fetched."}]})");
    WriteFile(dir_.Sub("slow.json"), R"({"responses": [
      {"text": "a", "delay_ms": 300, "tool_calls": [{"name": "http_request", "input": {"url": ")" + target + R"(/1"}}]},
      {"text": "b", "delay_ms": 300, "tool_calls": [{"name": "http_request", "input": {"url": ")" + target + R"(/2"}}]},
      {"text": "c", "delay_ms": 300}]})");
    WriteFile(dir_.Sub("stuck.json"), R"({"responses": [{"text": "thinking", "delay_ms": 60000}]})");
    WriteFile(dir_.Sub("loop.json"), R"({"loop": true, "responses": [
      {"text": "again", "tool_calls": [{"name": "http_request", "input": {"url": ")" + target + R"(/loop"}}]}]})");
    WriteFile(dir_.Sub("secret.json"), R"({"responses": [
      {"text": "two calls", "tool_calls": [
        {"name": "http_request", "input": {"url": ")" + target + R"(/private", "headers": {"Authorization": "Bearer guess"}}},
        {"name": "http_request", "input": {"url": "http://localhost:)" + std::to_string(target_->port()) + R"(/other"}}]},
      {"text": "ok"}]})");
    harness_ = std::make_unique<HarnessProcess>(dir_.Sub("harness.json"), Config());
    ASSERT_FALSE(harness_->address.empty()) << "sinew-harness did not start";
    base_ = harness_->url();
  }

  std::string Config() const {
    const std::string d = dir_.path();
    return R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" + std::string(kKeyA) + R"(": "tenant-a", ")" + kKeyB + R"(": "tenant-b"},
      "default_model": "basic",
      "models": {"basic": {"kind": "scripted", "script": ")" + d + R"(/basic.json"},
                 "slow": {"kind": "scripted", "script": ")" + d + R"(/slow.json"},
                 "stuck": {"kind": "scripted", "script": ")" + d + R"(/stuck.json"},
                 "loop": {"kind": "scripted", "script": ")" + d + R"(/loop.json"},
                 "secret": {"kind": "scripted", "script": ")" + d + R"(/secret.json"},
                 "served": {"kind": "openai", "base_url": ")" + target_->url() + R"(/llm", "max_retries": 0}},
      "secrets": {"target_token": {"value": ")" + kSecret + R"("}},
      "http_request": {"allow": [{"host": "127.0.0.1:)" + std::to_string(target_->port()) + R"(", "secret": "target_token"}]},
      "max_request_bytes": 65536, "read_timeout_seconds": 2, "lease_ttl_ms": 2000, "scan_interval_ms": 500})";
  }

  // Submits a task; returns the session id ("" on failure).
  std::string Submit(const std::string& body, const char* key = kKeyA) {
    auto r = Api("POST", base_ + "/v1/sessions", key, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(r.json.at("session").at("id").as_string());
  }

  testing::TempDir dir_;
  std::unique_ptr<TestHttpServer> target_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
  std::string base_;
};

inline std::string ErrorCode(const Reply& r) {
  if (!r.json.is_object() || !r.json.as_object().contains("error")) return "(no error body: " + r.body + ")";
  return std::string(r.json.at("error").at("code").as_string());
}

}  // namespace sinew::harness::test
