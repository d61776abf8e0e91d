// Wire-format tests of the HTTP model clients against an HTTP server in the test that
// speaks the documented formats (OpenAI Chat Completions and Anthropic Messages, both
// with server-sent-event streaming), including retries, timeouts and refusals.
#include <gtest/gtest.h>

#include <atomic>

#include "sinew/harness/model_client.h"
#include "test_util.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using test::TestHttpServer;

ModelCall SampleCall() {
  ModelCall call;
  call.model = "wire-model";
  call.system = "be brief";
  call.max_output_tokens = 99;
  call.turn = 2;
  ChatMessage user;
  user.text = "list files";
  ChatMessage assistant;
  assistant.role = ChatMessage::Role::kAssistant;
  assistant.tool_calls.push_back({"call_a", "bash", R"({"command":"ls"})"});
  ChatMessage tool;
  tool.role = ChatMessage::Role::kTool;
  tool.tool_call_id = "call_a";
  tool.text = "a.txt";
  call.messages = {user, assistant, tool};
  call.tools.push_back({"bash", "runs bash", R"({"type":"object","properties":{"command":{"type":"string"}}})"});
  return call;
}

ModelEndpointConfig Endpoint(const std::string& kind, const std::string& url) {
  ModelEndpointConfig c;
  c.kind = kind;
  c.base_url = url;
  c.model = "wire-model";
  c.backoff_ms = 1;
  c.max_retries = 3;
  c.timeout_seconds = 5;
  return c;
}

std::string Sse(const std::string& data) { return "data: " + data + "\n\n"; }

TEST(OpenAiWireTest, SendsTheDocumentedRequestAndParsesStreamedTextAndToolCalls) {
  TestHttpServer server([](const TestHttpServer::Request&) {
    TestHttpServer::Response r;
    r.content_type = "text/event-stream";
    r.chunks = {
        Sse(R"({"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]})"),
        Sse(R"({"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]})"),
        Sse(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_9","type":"function","function":{"name":"bash","arguments":"{\"comm"}}]},"finish_reason":null}]})"),
        Sse(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"and\":\"pwd\"}"}}]},"finish_reason":null}]})"),
        Sse(R"({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})"),
        Sse(R"({"choices":[],"usage":{"prompt_tokens":31,"completion_tokens":12,"prompt_tokens_details":{"cached_tokens":16}}})"),
        Sse("[DONE]")};
    return r;
  });
  auto client = MakeModelClient(Endpoint("openai", server.url() + "/v1"), "sk-test");
  ASSERT_TRUE(client.ok());
  std::string streamed;
  auto reply = (*client)->Complete(SampleCall(), [&](std::string_view d) { streamed += d; });
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(streamed, "Hello");
  EXPECT_EQ(reply->text, "Hello");
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].id, "call_9");
  EXPECT_EQ(reply->tool_calls[0].name, "bash");
  EXPECT_EQ(reply->tool_calls[0].input_json, R"({"command":"pwd"})");
  EXPECT_EQ(reply->stop_reason, "tool_use");
  EXPECT_EQ(reply->prompt_tokens, 31u);
  EXPECT_EQ(reply->completion_tokens, 12u);
  EXPECT_EQ(reply->cached_prompt_tokens, 16u);
  EXPECT_GE(reply->time_to_first_token_ms, 0);

  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 1u);
  const auto& req = requests[0];
  EXPECT_EQ(req.method, "POST");
  EXPECT_EQ(req.target, "/v1/chat/completions");
  EXPECT_EQ(req.headers.at("authorization"), "Bearer sk-test");
  json::object body = json::parse(req.body).as_object();
  EXPECT_EQ(body.at("model").as_string(), "wire-model");
  EXPECT_TRUE(body.at("stream").as_bool());
  EXPECT_EQ(body.at("max_tokens").as_int64(), 99);
  const auto& msgs = body.at("messages").as_array();
  ASSERT_EQ(msgs.size(), 4u);
  EXPECT_EQ(msgs[0].at("role").as_string(), "system");
  EXPECT_EQ(msgs[1].at("content").as_string(), "list files");
  EXPECT_TRUE(msgs[2].at("content").is_null());
  EXPECT_EQ(msgs[2].at("tool_calls").at(0).at("function").at("arguments").as_string(), R"({"command":"ls"})");
  EXPECT_EQ(msgs[3].at("role").as_string(), "tool");
  EXPECT_EQ(msgs[3].at("tool_call_id").as_string(), "call_a");
  EXPECT_EQ(body.at("tools").at(0).at("function").at("parameters").at("type").as_string(), "object");
}

TEST(OpenAiWireTest, RetriesRateLimitsAndServerErrorsThenSucceeds) {
  std::atomic<int> calls{0};
  TestHttpServer server([&](const TestHttpServer::Request&) {
    TestHttpServer::Response r;
    const int n = calls++;
    if (n == 0) {
      r.status = 429;
      r.headers = {{"Retry-After", "0"}};
      r.body = R"({"error":{"message":"slow down"}})";
    } else if (n == 1) {
      r.status = 503;
      r.body = R"({"error":{"message":"overloaded"}})";
    } else {
      r.content_type = "text/event-stream";
      r.body = Sse(R"({"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]})") + Sse("[DONE]");
    }
    return r;
  });
  auto client = MakeModelClient(Endpoint("openai", server.url()), "");
  auto reply = (*client)->Complete(SampleCall(), nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->text, "ok");
  EXPECT_EQ(reply->stop_reason, "end_turn");
  EXPECT_EQ(reply->attempts, 3u);
  EXPECT_EQ(calls.load(), 3);
  EXPECT_EQ(server.requests()[0].headers.count("authorization"), 0u);
}

TEST(OpenAiWireTest, GivesUpAfterRetriesAndNeverRetriesARefusal) {
  std::atomic<int> calls{0};
  TestHttpServer always500([&](const TestHttpServer::Request&) {
    ++calls;
    TestHttpServer::Response r;
    r.status = 500;
    r.body = "boom";
    return r;
  });
  auto client = MakeModelClient(Endpoint("openai", always500.url()), "");
  auto reply = (*client)->Complete(SampleCall(), nullptr);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply.status().message().find("HTTP 500: boom"), std::string::npos);
  EXPECT_EQ(calls.load(), 2);  // a 500 with an error body: retried once

  calls = 0;
  TestHttpServer always503([&](const TestHttpServer::Request&) {
    ++calls;
    TestHttpServer::Response r;
    r.status = 503;
    r.body = "overloaded";
    return r;
  });
  auto client503 = MakeModelClient(Endpoint("openai", always503.url()), "");
  auto reply503 = (*client503)->Complete(SampleCall(), nullptr);
  EXPECT_EQ(reply503.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(reply503.status().message().find("after 4 attempts: HTTP 503: overloaded"), std::string::npos)
      << reply503.status().message();
  EXPECT_EQ(calls.load(), 4);

  calls = 0;
  TestHttpServer refuses([&](const TestHttpServer::Request&) {
    ++calls;
    TestHttpServer::Response r;
    r.status = 400;
    r.body = R"({"error":{"message":"bad tools"}})";
    return r;
  });
  auto client2 = MakeModelClient(Endpoint("openai", refuses.url()), "");
  auto refused = (*client2)->Complete(SampleCall(), nullptr);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("bad tools"), std::string::npos);
  EXPECT_EQ(calls.load(), 1);
}

TEST(OpenAiWireTest, TimesOutASilentServer) {
  TestHttpServer slow([](const TestHttpServer::Request&) {
    TestHttpServer::Response r;
    r.delay_ms = 2500;
    r.body = "{}";
    return r;
  });
  auto config = Endpoint("openai", slow.url());
  config.timeout_seconds = 1;
  config.max_retries = 0;
  auto client = MakeModelClient(config, "");
  auto reply = (*client)->Complete(SampleCall(), nullptr);
  EXPECT_EQ(reply.status().code(), StatusCode::kDeadlineExceeded) << reply.status().ToString();
}

TEST(OpenAiWireTest, AGarbledStreamIsCorruptionNotRetried) {
  std::atomic<int> calls{0};
  TestHttpServer garbled([&](const TestHttpServer::Request&) {
    ++calls;
    TestHttpServer::Response r;
    r.content_type = "text/event-stream";
    r.body = "data: {not json\n\n";
    return r;
  });
  auto client = MakeModelClient(Endpoint("openai", garbled.url()), "");
  EXPECT_EQ((*client)->Complete(SampleCall(), nullptr).status().code(), StatusCode::kCorruption);
  EXPECT_EQ(calls.load(), 1);
}

std::string AnthropicEvent(const std::string& type, const std::string& data) {
  return "event: " + type + "\ndata: " + data + "\n\n";
}

TEST(AnthropicWireTest, SendsMessagesWithToolBlocksAndParsesTheStream) {
  TestHttpServer server([](const TestHttpServer::Request&) {
    TestHttpServer::Response r;
    r.content_type = "text/event-stream";
    r.chunks = {
        AnthropicEvent("message_start", R"({"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":25,"cache_read_input_tokens":8,"output_tokens":1}}})"),
        AnthropicEvent("content_block_start", R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})"),
        AnthropicEvent("ping", R"({"type":"ping"})"),
        AnthropicEvent("content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me "}})"),
        AnthropicEvent("content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"look."}})"),
        AnthropicEvent("content_block_stop", R"({"type":"content_block_stop","index":0})"),
        AnthropicEvent("content_block_start", R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}})"),
        AnthropicEvent("content_block_delta", R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": "}})"),
        AnthropicEvent("content_block_delta", R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"ls -la\"}"}})"),
        AnthropicEvent("content_block_stop", R"({"type":"content_block_stop","index":1})"),
        AnthropicEvent("message_delta", R"({"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":15}})"),
        AnthropicEvent("message_stop", R"({"type":"message_stop"})")};
    return r;
  });
  auto client = MakeModelClient(Endpoint("anthropic", server.url() + "/v1"), "ak-test");
  ASSERT_TRUE(client.ok());
  std::string streamed;
  auto reply = (*client)->Complete(SampleCall(), [&](std::string_view d) { streamed += d; });
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(streamed, "Let me look.");
  EXPECT_EQ(reply->stop_reason, "tool_use");
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].id, "toolu_1");
  EXPECT_EQ(json::parse(reply->tool_calls[0].input_json).at("command").as_string(), "ls -la");
  EXPECT_EQ(reply->prompt_tokens, 25u);
  EXPECT_EQ(reply->cached_prompt_tokens, 8u);
  EXPECT_EQ(reply->completion_tokens, 15u);

  const auto req = server.requests().at(0);
  EXPECT_EQ(req.target, "/v1/messages");
  EXPECT_EQ(req.headers.at("x-api-key"), "ak-test");
  EXPECT_EQ(req.headers.at("anthropic-version"), "2023-06-01");
  json::object body = json::parse(req.body).as_object();
  EXPECT_EQ(body.at("system").as_string(), "be brief");
  EXPECT_EQ(body.at("max_tokens").as_int64(), 99);
  EXPECT_EQ(body.at("tools").at(0).at("input_schema").at("type").as_string(), "object");
  const auto& msgs = body.at("messages").as_array();
  ASSERT_EQ(msgs.size(), 3u);
  EXPECT_EQ(msgs[1].at("role").as_string(), "assistant");
  EXPECT_EQ(msgs[1].at("content").at(0).at("type").as_string(), "tool_use");
  EXPECT_EQ(msgs[1].at("content").at(0).at("input").at("command").as_string(), "ls");
  EXPECT_EQ(msgs[2].at("role").as_string(), "user");
  EXPECT_EQ(msgs[2].at("content").at(0).at("type").as_string(), "tool_result");
  EXPECT_EQ(msgs[2].at("content").at(0).at("tool_use_id").as_string(), "call_a");
}

TEST(AnthropicWireTest, RetriesAnOverloadedErrorInTheStream) {
  std::atomic<int> calls{0};
  TestHttpServer server([&](const TestHttpServer::Request&) {
    TestHttpServer::Response r;
    r.content_type = "text/event-stream";
    if (calls++ == 0) {
      r.body = AnthropicEvent("error", R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})");
    } else {
      r.body = AnthropicEvent("content_block_delta", R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"fine"}})") +
               AnthropicEvent("message_delta", R"({"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":1}})");
    }
    return r;
  });
  auto client = MakeModelClient(Endpoint("anthropic", server.url()), "");
  auto reply = (*client)->Complete(SampleCall(), nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->text, "fine");
  EXPECT_EQ(reply->stop_reason, "end_turn");
  EXPECT_EQ(calls.load(), 2);
}

TEST(ModelClientTest, CancellationAbandonsACall) {
  TestHttpServer slow([](const TestHttpServer::Request&) {
    TestHttpServer::Response r;
    r.content_type = "text/event-stream";
    r.chunks = {": wait\n\n", ": wait\n\n", ": wait\n\n", ": wait\n\n"};
    r.chunk_delay_ms = 500;
    return r;
  });
  auto client = MakeModelClient(Endpoint("openai", slow.url()), "");
  std::atomic<bool> cancelled{false};
  ModelCall call = SampleCall();
  call.cancelled = &cancelled;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    cancelled = true;
  });
  auto reply = (*client)->Complete(call, nullptr);
  canceller.join();
  EXPECT_EQ(reply.status().code(), StatusCode::kCancelled) << reply.status().ToString();
}

}  // namespace
}  // namespace sinew::harness
