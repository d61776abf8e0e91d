// The agent loop against a server that refuses to stream with tools: a real sinew-store
// and sinew-harness, and a test double of llama.cpp's llama-server b4747 (an HTTP
// server in the test that answers /v1/chat/completions as that server does: a streaming
// request with tools gets 500 "Cannot use tools with stream"; whole requests get a
// chat.completion with reasoning_content, <think> in content, tool_calls and usage).
// The double also serves /data, the target of the session's http_request tool call.
#include <gtest/gtest.h>

#include "test_util.h"

namespace sinew::harness::test {
namespace {

namespace json = boost::json;

constexpr const char* kKey = "key-compat";

bool HasToolResult(const json::object& body) {
  for (const auto& m : body.at("messages").as_array()) {
    if (m.as_object().at("role").as_string() == "tool") return true;
  }
  return false;
}

class LlamaServerHarnessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    llama_ = std::make_unique<TestHttpServer>([this](const TestHttpServer::Request& r) { return Answer(r); });
    store_ = std::make_unique<StoreProcess>(dir_.Sub("db"));
    ASSERT_FALSE(store_->address.empty()) << "sinew-store did not start";
    const std::string url = llama_->url();
    const std::string config = R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store_->address + R"("},
      "api_keys": {")" + std::string(kKey) + R"(": "tenant"},
      "models": {"llama": {"kind": "openai", "base_url": ")" + url + R"(/v1", "max_retries": 2, "backoff_ms": 1},
                 "broken": {"kind": "openai", "base_url": ")" + url + R"(/broken/v1", "max_retries": 2, "backoff_ms": 1}},
      "http_request": {"allow": [{"host": "127.0.0.1:)" + std::to_string(llama_->port()) + R"("}]},
      "lease_ttl_ms": 2000, "scan_interval_ms": 500})";
    harness_ = std::make_unique<HarnessProcess>(dir_.Sub("harness.json"), config);
    ASSERT_FALSE(harness_->address.empty()) << "sinew-harness did not start";
  }

  TestHttpServer::Response Answer(const TestHttpServer::Request& r) {
    TestHttpServer::Response resp;
    if (r.target == "/data") {
      resp.content_type = "text/plain";
      resp.body = "the answer is 42";
      return resp;
    }
    if (r.target == "/broken/v1/chat/completions") {
      resp.status = 400;
      resp.body = json::serialize(json::object{{"error", json::object{{"code", 400}, {"message", BrokenMessage()}}}});
      return resp;
    }
    json::object body = json::parse(r.body).as_object();
    const bool stream = body.contains("stream") && body.at("stream").as_bool();
    if (stream && body.contains("tools")) {
      resp.status = 500;
      resp.body = R"({"error":{"code":500,"message":"Cannot use tools with stream","type":"server_error"}})";
      return resp;
    }
    if (stream) {  // this double streams only without tools, which the harness never asks for here
      resp.status = 400;
      resp.body = R"({"error":{"message":"unexpected"}})";
      return resp;
    }
    if (!HasToolResult(body)) {
      resp.body = json::serialize(json::object{
          {"object", "chat.completion"},
          {"choices", json::array{json::object{
                          {"index", 0},
                          {"finish_reason", "tool_calls"},
                          {"message", json::object{{"role", "assistant"},
                                                   {"content", nullptr},
                                                   {"reasoning_content", "I should fetch the data."},
                                                   {"tool_calls", json::array{json::object{
                                                                      {"id", "call_llama_1"},
                                                                      {"type", "function"},
                                                                      {"function", json::object{{"name", "http_request"},
                                                                                                {"arguments", R"({"url": ")" + llama_->url() + R"(/data"})"}}}}}}}}}}},
          {"usage", json::object{{"prompt_tokens", 120}, {"completion_tokens", 20}}}});
    } else {
      resp.body = R"({"object":"chat.completion","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant",
        "content":"<think>The tool said 42.</think>\n\nThe answer is 42."}}],"usage":{"prompt_tokens":150,"completion_tokens":9}})";
    }
    return resp;
  }

  static std::string BrokenMessage() {
    return "the chat template could not render these messages: " + std::string(1500, '#') + " (end of message)";
  }

  std::vector<bool> ChatStreams() {
    std::vector<bool> out;
    for (const auto& r : llama_->requests()) {
      if (r.target != "/v1/chat/completions") continue;
      out.push_back(json::parse(r.body).as_object().at("stream").as_bool());
    }
    return out;
  }

  std::string Submit(const std::string& body) {
    auto r = Api("POST", harness_->url() + "/v1/sessions", kKey, body);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(r.json.at("session").at("id").as_string());
  }

  testing::TempDir dir_;
  std::unique_ptr<TestHttpServer> llama_;
  std::unique_ptr<StoreProcess> store_;
  std::unique_ptr<HarnessProcess> harness_;
};

TEST_F(LlamaServerHarnessTest, AToolUsingSessionCompletesWithoutStreamingAndKeepsReasoningApart) {
  const std::string id = Submit(R"({"prompt": "What does /data say?", "model": "llama"})");
  ASSERT_EQ(WaitForStatus(harness_->url(), kKey, id, "completed,failed"), "completed");
  // One refused stream, then whole requests only: the refusal is remembered.
  EXPECT_EQ(ChatStreams(), (std::vector<bool>{true, false, false}));
  auto events = AllEvents(harness_->url(), kKey, id);
  auto responses = OfType(events, "model_response");
  ASSERT_EQ(responses.size(), 2u);
  EXPECT_EQ(responses[0].at("reasoning").as_string(), "I should fetch the data.");
  EXPECT_FALSE(responses[0].contains("text"));  // no answer text, only a tool call
  EXPECT_EQ(responses[0].at("tool_calls").at(0).at("call_id").as_string(), "call_llama_1");
  EXPECT_EQ(responses[0].at("usage").at("prompt_tokens").as_string(), "120");
  EXPECT_EQ(responses[1].at("text").as_string(), "The answer is 42.");
  EXPECT_EQ(responses[1].at("reasoning").as_string(), "The tool said 42.");
  EXPECT_EQ(responses[1].at("usage").at("completion_tokens").as_string(), "9");
  auto results = OfType(events, "tool_result");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NE(std::string(results[0].at("output").as_string()).find("the answer is 42"), std::string::npos);
  // The reasoning is not sent back to the model as part of the answer.
  for (const auto& r : llama_->requests()) {
    EXPECT_EQ(r.body.find("The tool said"), std::string::npos);
  }
}

TEST_F(LlamaServerHarnessTest, AFailedCallsEventCarriesTheHttpStatusAndTheServersWholeMessage) {
  const std::string id = Submit(R"({"prompt": "hello", "model": "broken"})");
  ASSERT_EQ(WaitForStatus(harness_->url(), kKey, id, "completed,failed"), "failed");
  int broken_calls = 0;
  for (const auto& r : llama_->requests()) broken_calls += r.target == "/broken/v1/chat/completions";
  EXPECT_EQ(broken_calls, 1);  // a 400 is not retried
  auto errors = OfType(AllEvents(harness_->url(), kKey, id), "error");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].at("code").as_string(), "model_error");
  EXPECT_EQ(errors[0].at("http_status").as_int64(), 400);
  const std::string message(errors[0].at("message").as_string());
  EXPECT_NE(message.find("HTTP 400: " + BrokenMessage()), std::string::npos) << message;
  EXPECT_FALSE(errors[0].contains("retryable"));  // false is not printed in proto JSON
}

}  // namespace
}  // namespace sinew::harness::test
