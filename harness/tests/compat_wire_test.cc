// Wire-format tests of the model clients against the OpenAI-compatible servers people
// run, where no such server can be built: LlamaServerDouble is a test double (an HTTP
// server in the test) that reproduces llama.cpp's llama-server b4747 on
// /v1/chat/completions: a streaming request with tools gets
//   500 {"error":{"code":500,"message":"Cannot use tools with stream","type":"server_error"}}
// and a whole request gets a chat.completion with message.content,
// message.reasoning_content, message.tool_calls and usage. Also: the retry policy, the
// server's message in failures, reasoning kept apart from the answer, and the pieces
// behind them (RetryPolicyFor, ServerErrorMessage; the <think> splitter is
// common/src/reasoning_splitter_test.cc).
#include <mutex>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "model_clients.h"
#include "sinew/harness/model_client.h"
#include "sinew/testing/subprocess.h"
#include "test_util.h"

namespace sinew::harness {
namespace {

namespace json = boost::json;
using test::TestHttpServer;

std::string Sse(const std::string& data) { return "data: " + data + "\n\n"; }

ModelCall ToolCall() {
  ModelCall call;
  call.model = "stories";
  call.turn = 1;
  ChatMessage user;
  user.text = "list files";
  call.messages = {user};
  call.tools.push_back({"bash", "runs bash", R"({"type":"object","properties":{"command":{"type":"string"}}})"});
  return call;
}

ModelEndpointConfig Endpoint(const std::string& url, const std::string& stream = "auto") {
  ModelEndpointConfig c;
  c.kind = "openai";
  c.base_url = url + "/v1";
  c.model = "stories";
  c.backoff_ms = 1;
  c.max_retries = 3;
  c.timeout_seconds = 5;
  c.stream = stream;
  return c;
}

// The test double of llama-server b4747 (see the file comment).
class LlamaServerDouble {
 public:
  LlamaServerDouble()
      : server_([this](const TestHttpServer::Request& r) { return Answer(r); }) {}
  std::string url() const { return server_.url(); }
  std::vector<TestHttpServer::Request> requests() { return server_.requests(); }
  // The "stream" flag of each request, in order.
  std::vector<bool> streams() {
    std::vector<bool> out;
    for (const auto& r : server_.requests()) {
      const auto* s = json::parse(r.body).as_object().if_contains("stream");
      out.push_back(s != nullptr && s->as_bool());
    }
    return out;
  }

 private:
  TestHttpServer::Response Answer(const TestHttpServer::Request& r) {
    TestHttpServer::Response resp;
    json::object body = json::parse(r.body).as_object();
    const bool stream = body.contains("stream") && body.at("stream").as_bool();
    const bool tools = body.contains("tools") && !body.at("tools").as_array().empty();
    if (stream && tools) {
      resp.status = 500;
      resp.body = R"({"error":{"code":500,"message":"Cannot use tools with stream","type":"server_error"}})";
      return resp;
    }
    if (stream) {
      resp.content_type = "text/event-stream";
      resp.chunks = {
          Sse(R"({"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Once"}}],"object":"chat.completion.chunk"})"),
          Sse(R"({"choices":[{"finish_reason":null,"index":0,"delta":{"content":" upon"}}],"object":"chat.completion.chunk"})"),
          Sse(R"({"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"object":"chat.completion.chunk","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11}})"),
          Sse("[DONE]")};
      return resp;
    }
    if (tools) {
      resp.body = R"({"choices":[{"finish_reason":"tool_calls","index":0,"message":{"role":"assistant","content":null,
        "reasoning_content":"The user wants files.","tool_calls":[{"type":"function","function":{"name":"bash",
        "arguments":"{\"command\":\"ls\"}"},"id":"aBc123"}]}}],"object":"chat.completion",
        "usage":{"completion_tokens":14,"prompt_tokens":40,"total_tokens":54}})";
    } else {
      resp.body = R"({"choices":[{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"Once upon"}}],
        "object":"chat.completion","usage":{"completion_tokens":2,"prompt_tokens":9,"total_tokens":11}})";
    }
    return resp;
  }

  TestHttpServer server_;
};

TEST(LlamaServerCompatTest, AutoRepeatsARefusedStreamingCallWholeAndRemembersIt) {
  LlamaServerDouble llama;
  auto client = MakeModelClient(Endpoint(llama.url()), "");
  ASSERT_TRUE(client.ok());
  std::string streamed;
  auto reply = (*client)->Complete(ToolCall(), [&](std::string_view d) { streamed += d; });
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(llama.streams(), (std::vector<bool>{true, false}));
  EXPECT_FALSE(reply->streamed);
  EXPECT_EQ(reply->attempts, 2u);
  ASSERT_EQ(reply->tool_calls.size(), 1u);
  EXPECT_EQ(reply->tool_calls[0].id, "aBc123");
  EXPECT_EQ(reply->tool_calls[0].name, "bash");
  EXPECT_EQ(reply->tool_calls[0].input_json, R"({"command":"ls"})");
  EXPECT_EQ(reply->stop_reason, "tool_use");
  EXPECT_EQ(reply->text, "");
  EXPECT_EQ(reply->reasoning, "The user wants files.");
  EXPECT_EQ(reply->prompt_tokens, 40u);
  EXPECT_EQ(reply->completion_tokens, 14u);
  EXPECT_EQ(reply->time_to_first_token_ms, -1);
  // The whole request carries no stream_options (only for streams).
  EXPECT_FALSE(json::parse(llama.requests()[1].body).as_object().contains("stream_options"));

  // The next call of this model goes straight to a whole request, even without tools.
  ModelCall plain = ToolCall();
  plain.tools.clear();
  streamed.clear();
  auto second = (*client)->Complete(plain, [&](std::string_view d) { streamed += d; });
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(llama.streams(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(second->text, "Once upon");
  EXPECT_EQ(streamed, "Once upon");  // the callback sees the whole answer once
  EXPECT_EQ(second->attempts, 1u);
}

TEST(LlamaServerCompatTest, AutoStreamsWhatTheServerStreams) {
  LlamaServerDouble llama;
  auto client = MakeModelClient(Endpoint(llama.url()), "");
  ModelCall plain = ToolCall();
  plain.tools.clear();
  std::string streamed;
  auto reply = (*client)->Complete(plain, [&](std::string_view d) { streamed += d; });
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(llama.streams(), (std::vector<bool>{true}));
  EXPECT_TRUE(reply->streamed);
  EXPECT_EQ(streamed, "Once upon");
  EXPECT_EQ(reply->text, "Once upon");
  EXPECT_EQ(reply->stop_reason, "end_turn");
  EXPECT_EQ(reply->prompt_tokens, 9u);
  EXPECT_EQ(reply->completion_tokens, 2u);
  EXPECT_GE(reply->time_to_first_token_ms, 0);
}

TEST(LlamaServerCompatTest, StreamOnFailsWithTheServersRefusalAndNoRetry) {
  LlamaServerDouble llama;
  auto client = MakeModelClient(Endpoint(llama.url(), "on"), "");
  ModelFailure failure;
  ModelCall call = ToolCall();
  call.failure = &failure;
  auto reply = (*client)->Complete(call, nullptr);
  EXPECT_EQ(reply.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(reply.status().message().find("HTTP 500: Cannot use tools with stream"), std::string::npos)
      << reply.status().message();
  EXPECT_EQ(llama.streams(), (std::vector<bool>{true}));
  EXPECT_EQ(failure.http_status, 500);
  EXPECT_EQ(failure.server_message, "Cannot use tools with stream");
  EXPECT_EQ(failure.attempts, 1u);
  EXPECT_FALSE(failure.retryable);
}

TEST(LlamaServerCompatTest, StreamOffNeverStreams) {
  LlamaServerDouble llama;
  auto client = MakeModelClient(Endpoint(llama.url(), "off"), "");
  ModelCall plain = ToolCall();
  plain.tools.clear();
  auto reply = (*client)->Complete(plain, nullptr);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  auto reply2 = (*client)->Complete(ToolCall(), nullptr);
  ASSERT_TRUE(reply2.ok()) << reply2.status().ToString();
  EXPECT_EQ(llama.streams(), (std::vector<bool>{false, false}));
  EXPECT_EQ(reply->text, "Once upon");
  EXPECT_EQ(reply2->tool_calls.size(), 1u);
}

TEST(LlamaServerCompatTest, MakeModelClientRejectsAnUnknownStreamMode) {
  EXPECT_EQ(MakeModelClient(Endpoint("http://127.0.0.1:1", "sometimes"), "").status().code(),
            StatusCode::kInvalidArgument);
}

// A server that answers streamed and whole: the reply is the same either way.
TEST(ModelClientStreamTest, StreamedAndWholeRepliesAreTheSame) {
  TestHttpServer server([](const TestHttpServer::Request& r) {
    TestHttpServer::Response resp;
    if (json::parse(r.body).as_object().at("stream").as_bool()) {
      resp.content_type = "text/event-stream";
      resp.chunks = {
          Sse(R"({"choices":[{"index":0,"delta":{"reasoning_content":"Need "}}]})"),
          Sse(R"({"choices":[{"index":0,"delta":{"reasoning_content":"ls."}}]})"),
          Sse(R"({"choices":[{"index":0,"delta":{"content":"Listing."}}]})"),
          Sse(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"bash","arguments":"{\"command\""}}]}}]})"),
          Sse(R"({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":\"ls\"}"}}]}}]})"),
          Sse(R"({"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})"),
          Sse(R"({"choices":[],"usage":{"prompt_tokens":31,"completion_tokens":12}})"), Sse("[DONE]")};
    } else {
      // Same arguments as the stream, concatenated.
      resp.body = R"({"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant",
        "reasoning_content":"Need ls.","content":"Listing.","tool_calls":[{"id":"c1","type":"function",
        "function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]}}],
        "usage":{"prompt_tokens":31,"completion_tokens":12}})";
    }
    return resp;
  });
  auto on = MakeModelClient(Endpoint(server.url(), "on"), "");
  auto off = MakeModelClient(Endpoint(server.url(), "off"), "");
  auto a = (*on)->Complete(ToolCall(), nullptr);
  auto b = (*off)->Complete(ToolCall(), nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->streamed);
  EXPECT_FALSE(b->streamed);
  for (const ModelReply* r : {&*a, &*b}) {
    EXPECT_EQ(r->text, "Listing.");
    EXPECT_EQ(r->reasoning, "Need ls.");
    ASSERT_EQ(r->tool_calls.size(), 1u);
    EXPECT_EQ(r->tool_calls[0].id, "c1");
    EXPECT_EQ(r->tool_calls[0].input_json, R"({"command":"ls"})");
    EXPECT_EQ(r->stop_reason, "tool_use");
    EXPECT_EQ(r->prompt_tokens, 31u);
    EXPECT_EQ(r->completion_tokens, 12u);
  }
}

// Earlier reasoning goes back to the model only where its config asks (a template that
// renders reasoning_content); by default the model sees answers alone.
TEST(ModelClientStreamTest, EarlierReasoningIsSentBackOnlyWhenTheModelAsks) {
  std::mutex mu;
  std::vector<std::string> bodies;
  TestHttpServer server([&](const TestHttpServer::Request& r) {
    {
      std::lock_guard<std::mutex> lock(mu);
      bodies.push_back(r.body);
    }
    TestHttpServer::Response resp;
    resp.content_type = "application/json";
    resp.body = R"({"choices":[{"index":0,"message":{"role":"assistant","content":"Done."},"finish_reason":"stop"}],
                    "usage":{"prompt_tokens":5,"completion_tokens":1}})";
    return resp;
  });
  ModelCall call = ToolCall();
  ChatMessage answer;
  answer.role = ChatMessage::Role::kAssistant;
  answer.text = "Listing.";
  answer.reasoning = "Need ls.";
  answer.tool_calls.push_back({"c1", "bash", R"({"command":"ls"})"});
  ChatMessage result;
  result.role = ChatMessage::Role::kTool;
  result.tool_call_id = "c1";
  result.text = "a.txt";
  call.messages.push_back(answer);
  call.messages.push_back(result);
  for (bool send : {false, true}) {
    ModelEndpointConfig config = Endpoint(server.url(), "off");
    config.reasoning_in_history = send;
    auto client = MakeModelClient(config, "");
    ASSERT_TRUE((*client)->Complete(call, nullptr).ok());
    std::lock_guard<std::mutex> lock(mu);
    const json::value sent = json::parse(bodies.back());
    const auto& assistant = sent.at("messages").as_array().at(1).as_object();
    EXPECT_EQ(assistant.at("content").as_string(), "Listing.");
    if (send) {
      EXPECT_EQ(assistant.at("reasoning_content").as_string(), "Need ls.");
    } else {
      EXPECT_FALSE(assistant.contains("reasoning_content")) << bodies.back();
    }
  }
}

TEST(ModelClientStreamTest, ThinkTagsInStreamedContentBecomeReasoning) {
  TestHttpServer server([](const TestHttpServer::Request&) {
    TestHttpServer::Response resp;
    resp.content_type = "text/event-stream";
    // The tags are cut across chunks, as a tokenizer may send them.
    resp.chunks = {Sse(R"({"choices":[{"index":0,"delta":{"content":"<thi"}}]})"),
                   Sse(R"({"choices":[{"index":0,"delta":{"content":"nk>2+2 is 4"}}]})"),
                   Sse(R"({"choices":[{"index":0,"delta":{"content":", check.</th"}}]})"),
                   Sse(R"({"choices":[{"index":0,"delta":{"content":"ink>\n\nIt is"}}]})"),
                   Sse(R"({"choices":[{"index":0,"delta":{"content":" 4."},"finish_reason":"stop"}]})"),
                   Sse("[DONE]")};
    return resp;
  });
  auto client = MakeModelClient(Endpoint(server.url(), "on"), "");
  std::string streamed;
  auto reply = (*client)->Complete(ToolCall(), [&](std::string_view d) { streamed += d; });
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->reasoning, "2+2 is 4, check.");
  EXPECT_EQ(reply->text, "It is 4.");
  EXPECT_EQ(streamed, "It is 4.");
}

TEST(ModelClientStreamTest, AnthropicThinkingBlocksBecomeReasoningStreamedOrWhole) {
  TestHttpServer server([](const TestHttpServer::Request& r) {
    TestHttpServer::Response resp;
    if (json::parse(r.body).as_object().at("stream").as_bool()) {
      resp.content_type = "text/event-stream";
      resp.body =
          "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n"
          "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"Short.\"}}\n\n"
          "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
          "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":3}}\n\n";
    } else {
      resp.body = R"({"type":"message","content":[{"type":"thinking","thinking":"Short."},{"type":"text","text":"Hi"}],
        "stop_reason":"end_turn","usage":{"input_tokens":7,"output_tokens":3}})";
    }
    return resp;
  });
  for (const char* mode : {"on", "off"}) {
    ModelEndpointConfig c = Endpoint(server.url(), mode);
    c.kind = "anthropic";
    auto client = MakeModelClient(c, "");
    auto reply = (*client)->Complete(ToolCall(), nullptr);
    ASSERT_TRUE(reply.ok()) << mode << ": " << reply.status().ToString();
    EXPECT_EQ(reply->reasoning, "Short.") << mode;
    EXPECT_EQ(reply->text, "Hi") << mode;
    EXPECT_EQ(reply->completion_tokens, 3u) << mode;
  }
}

// One handler answering `status` with `body` (and headers) `failures` times, then "ok".
struct FlakyServer {
  explicit FlakyServer(int status, std::string body, int failures = 1000,
                       std::vector<std::pair<std::string, std::string>> headers = {})
      : server([=, this](const TestHttpServer::Request&) {
          TestHttpServer::Response r;
          if (calls++ < failures) {
            r.status = status;
            r.body = body;
            r.headers = headers;
          } else {
            r.body = R"({"choices":[{"index":0,"finish_reason":"stop","message":{"content":"ok"}}]})";
          }
          return r;
        }) {}
  std::atomic<int> calls{0};
  TestHttpServer server;
};

Result<ModelReply> CallOff(const std::string& url, ModelFailure* failure) {
  auto client = MakeModelClient(Endpoint(url, "off"), "");
  ModelCall call = ToolCall();
  call.failure = failure;
  return (*client)->Complete(call, nullptr);
}

TEST(ModelRetryTest, RetriesOnlyWhereARetryCanHelp) {
  for (int status : {408, 429, 502, 503, 504}) {
    FlakyServer flaky(status, R"({"error":{"message":"busy"}})", 2);
    ModelFailure failure;
    auto reply = CallOff(flaky.server.url(), &failure);
    ASSERT_TRUE(reply.ok()) << status << ": " << reply.status().ToString();
    EXPECT_EQ(reply->attempts, 3u) << status;
  }
  for (int status : {400, 401, 404, 422, 501}) {
    FlakyServer flaky(status, R"({"error":{"message":"no"}})");
    ModelFailure failure;
    auto reply = CallOff(flaky.server.url(), &failure);
    EXPECT_FALSE(reply.ok()) << status;
    EXPECT_EQ(flaky.calls.load(), 1) << status;
    EXPECT_EQ(failure.http_status, status);
    EXPECT_FALSE(failure.retryable);
    EXPECT_EQ(reply.status().code(), status < 500 ? StatusCode::kInvalidArgument : StatusCode::kUnavailable);
  }
}

TEST(ModelRetryTest, A500WithAnErrorBodyIsRetriedOnceOnly) {
  FlakyServer flaky(500, R"({"error":{"code":500,"message":"failed to decode","type":"server_error"}})");
  ModelFailure failure;
  auto reply = CallOff(flaky.server.url(), &failure);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(flaky.calls.load(), 2);
  EXPECT_EQ(failure.attempts, 2u);
  EXPECT_EQ(failure.http_status, 500);
  EXPECT_EQ(failure.server_message, "failed to decode");
  EXPECT_NE(reply.status().message().find("HTTP 500: failed to decode"), std::string::npos);

  FlakyServer once(500, R"({"error":{"message":"blip"}})", 1);
  auto recovered = CallOff(once.server.url(), nullptr);
  ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();
  EXPECT_EQ(recovered->attempts, 2u);
}

TEST(ModelRetryTest, RetryAfterIsHonouredAndTooLongAWaitFailsAtOnce) {
  FlakyServer limited(429, R"({"error":{"message":"rate limited"}})", 1, {{"Retry-After", "1"}});
  const auto t0 = std::chrono::steady_clock::now();
  auto reply = CallOff(limited.server.url(), nullptr);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->attempts, 2u);
  EXPECT_GE(waited, std::chrono::milliseconds(950));  // it waited what the server asked

  FlakyServer far(503, R"({"error":{"message":"maintenance"}})", 1000, {{"Retry-After", "3600"}});
  ModelFailure failure;
  auto refused = CallOff(far.server.url(), &failure);
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(far.calls.load(), 1);
  EXPECT_TRUE(failure.retryable);
  EXPECT_NE(refused.status().message().find("retry after 3600 s"), std::string::npos);
  EXPECT_NE(refused.status().message().find("maintenance"), std::string::npos);
}

TEST(ModelRetryTest, ConnectionErrorsAreRetriedAndReportNoHttpStatus) {
  sinew::testing::RefusingPort gone;
  ModelFailure failure;
  auto reply = CallOff("http://127.0.0.1:" + std::to_string(gone.port()), &failure);
  EXPECT_EQ(reply.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(failure.attempts, 4u);  // max_retries 3
  EXPECT_EQ(failure.http_status, 0);
  EXPECT_TRUE(failure.retryable);
  EXPECT_NE(reply.status().message().find("after 4 attempts"), std::string::npos);
}

TEST(ModelRetryTest, TheServersWholeMessageIsKeptUpTo2KB) {
  const std::string middle(1500, 'm');
  FlakyServer mid(400, R"({"error":{"message":"start )" + middle + R"( end"}})");
  ModelFailure failure;
  auto reply = CallOff(mid.server.url(), &failure);
  EXPECT_EQ(failure.server_message, "start " + middle + " end");
  EXPECT_NE(reply.status().message().find(" end"), std::string::npos);

  const std::string huge(10000, 'h');
  FlakyServer big(400, R"({"error":{"message":")" + huge + R"("}})");
  auto cut = CallOff(big.server.url(), &failure);
  EXPECT_EQ(failure.server_message.size(), kMaxServerMessage);
  EXPECT_EQ(failure.server_message.substr(kMaxServerMessage - 3), "...");
  EXPECT_LT(cut.status().message().size(), kMaxServerMessage + 200);

  FlakyServer plain(404, "no such route\n");
  auto ignored = CallOff(plain.server.url(), &failure);
  EXPECT_FALSE(ignored.ok());
  EXPECT_EQ(failure.server_message, "no such route");
}

TEST(ModelClientHelpersTest, RetryPolicy) {
  EXPECT_EQ(RetryPolicyFor(429, true), RetryPolicy::kRetry);
  EXPECT_EQ(RetryPolicyFor(408, false), RetryPolicy::kRetry);
  EXPECT_EQ(RetryPolicyFor(529, true), RetryPolicy::kRetry);
  EXPECT_EQ(RetryPolicyFor(500, true), RetryPolicy::kOnce);
  EXPECT_EQ(RetryPolicyFor(500, false), RetryPolicy::kRetry);
  EXPECT_EQ(RetryPolicyFor(501, true), RetryPolicy::kNever);
  EXPECT_EQ(RetryPolicyFor(400, true), RetryPolicy::kNever);
}

TEST(ModelClientHelpersTest, ServerErrorMessageAndStreamRefusal) {
  EXPECT_EQ(ServerErrorMessage(R"({"error":{"message":"Cannot use tools with stream","code":500}})"),
            "Cannot use tools with stream");
  EXPECT_EQ(ServerErrorMessage(R"({"message":"Cannot use tools with stream"})"), "Cannot use tools with stream");
  EXPECT_EQ(ServerErrorMessage(R"({"error":"model not loaded"})"), "model not loaded");
  EXPECT_EQ(ServerErrorMessage(R"({"error":{"type":"x"}})"), R"({"type":"x"})");
  EXPECT_EQ(ServerErrorMessage(""), "(empty body)");
  // A cut never splits a UTF-8 character.
  std::string euros;
  for (int i = 0; i < 1000; ++i) euros += "\xE2\x82\xAC";
  const std::string cut = ServerErrorMessage(euros);
  EXPECT_LE(cut.size(), kMaxServerMessage);
  EXPECT_EQ((cut.size() - 3) % 3, 0u);
  EXPECT_TRUE(IsStreamRefusal(500, "Cannot use tools with stream"));
  EXPECT_TRUE(IsStreamRefusal(400, "Unsupported param: stream_options"));
  EXPECT_FALSE(IsStreamRefusal(503, "stream overloaded"));
  EXPECT_FALSE(IsStreamRefusal(500, "out of memory"));
}

}  // namespace
}  // namespace sinew::harness
