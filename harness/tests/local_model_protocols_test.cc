// The harness drives the in-house model server through either of the protocols it
// serves: Chat Completions (model kind "openai") and Anthropic's Messages API (kind
// "anthropic"), both streamed. Real sinew-model serving stories260K, a real store and
// harness; the model server's own request log shows which endpoint each call reached.
#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "test_util.h"

namespace sinew::harness::test {
namespace {

constexpr const char* kKey = "protocols-key";

std::string StoriesGguf() {
  const char* source = std::getenv("SINEW_SOURCE_DIR");
  return std::string(source != nullptr ? source : ".") + "/../shared/models/stories260K.gguf";
}

// An int64 field of a proto-JSON object (written as a string); -1 when absent.
int64_t Int(const boost::json::object& o, const char* key) {
  const auto* v = o.if_contains(key);
  if (v == nullptr) return -1;
  return v->is_string() ? std::stoll(std::string(v->as_string())) : v->to_number<int64_t>();
}

class LocalModelProtocolTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LocalModelProtocolTest, ASessionCompletesOnSinewModelThroughThisProtocol) {
  const std::string kind = GetParam();
  const std::string endpoint = kind == "anthropic" ? "/v1/messages" : "/v1/chat/completions";
  const std::string gguf = StoriesGguf();
  ASSERT_EQ(access(gguf.c_str(), R_OK), 0) << "no model file at " << gguf;
  testing::TempDir dir;
  StoreProcess store(dir.Sub("db"));
  ASSERT_FALSE(store.address.empty());
  testing::Subprocess model({testing::BinaryPath("sinew-model"), "--model", gguf, "--port", "0",
                             "--grpc-port", "-1", "--threads", "1", "--log-format", "json"});
  auto listening = model.WaitForLine("http listening on", std::chrono::seconds(60));
  ASSERT_TRUE(listening.has_value()) << "sinew-model did not start";
  const std::string url = "http://" + listening->substr(listening->rfind(' ') + 1) + "/v1";
  HarnessProcess harness(dir.Sub("harness.json"),
                         R"({"listen": "127.0.0.1:0", "store": {"address": ")" + store.address +
                             R"("}, "api_keys": {")" + kKey + R"(": "t"},
    "models": {"local": {"kind": ")" +
                             kind + R"(", "base_url": ")" + url +
                             R"(", "model": "stories260K", "tools": false,
                         "context_tokens": 256, "max_output_tokens": 12}}})");
  ASSERT_FALSE(harness.address.empty());

  auto created = Api("POST", harness.url() + "/v1/sessions", kKey,
                     R"({"prompt": "Once upon a time", "model": "local"})");
  ASSERT_EQ(created.status, 201) << created.body;
  const std::string id(created.json.at("session").at("id").as_string());
  ASSERT_EQ(WaitForStatus(harness.url(), kKey, id, "completed,failed"), "completed");

  size_t responses = 0;
  for (const auto& e : AllEvents(harness.url(), kKey, id)) {
    if (!e.contains("model_response")) continue;
    ++responses;
    const auto& r = e.at("model_response").as_object();
    EXPECT_FALSE(Str(r, "text").empty()) << boost::json::serialize(r);
    ASSERT_TRUE(r.contains("usage")) << boost::json::serialize(r);
    const auto& usage = r.at("usage").as_object();
    EXPECT_GT(Int(usage, "prompt_tokens"), 0) << boost::json::serialize(r);
    EXPECT_GT(Int(usage, "completion_tokens"), 0) << boost::json::serialize(r);
    EXPECT_LE(Int(usage, "completion_tokens"), 12) << boost::json::serialize(r);
    // Streamed: the first token's time is known (-1 marks an answer that was not).
    EXPECT_GE(Int(r, "time_to_first_token_ms"), 0) << boost::json::serialize(r);
  }
  EXPECT_EQ(responses, 1u);

  // The calls reached the endpoint of this protocol, and only it.
  size_t here = 0;
  size_t elsewhere = 0;
  for (const auto& line : ReadJsonLines(&model, std::chrono::milliseconds(300))) {
    const std::string msg = Str(line, "msg");
    if (msg.rfind("request started: POST ", 0) != 0) continue;
    (msg == "request started: POST " + endpoint ? here : elsewhere) += 1;
  }
  EXPECT_EQ(here, 1u) << "no call reached " << endpoint;
  EXPECT_EQ(elsewhere, 0u);
}

INSTANTIATE_TEST_SUITE_P(BothProtocols, LocalModelProtocolTest,
                         ::testing::Values("openai", "anthropic"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

}  // namespace
}  // namespace sinew::harness::test
