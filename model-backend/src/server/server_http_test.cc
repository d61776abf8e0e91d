// The real sinew-model process with the real stories260K model, through libcurl.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <chrono>
#include <set>
#include <sstream>
#include <thread>

#include "server_test_util.h"
#include "sinew/model/gguf.h"
#include "sinew/model/tokenizer.h"

namespace sinew::model {
namespace {

namespace json = boost::json;
using testing::HttpCall;
using testing::ServerProcess;
using testing::SseData;

// What another mature GGUF engine generates for stories260K, "Once upon a time" (BOS
// prepended), greedy, 64 new tokens (the issue's reference).
constexpr char kGreedy64[] =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she "
    "saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said";

class ServerHttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(testing::Sha256OfFile(testing::StoriesPath()), testing::kStoriesSha256);
    std::string error;
    // Speculation in every decode (not the CPU default): every exact-text check
    // below then also checks that speculation changes no output.
    server_ = ServerProcess::Start({"--spec-any-rows"}, &error).release();
    ASSERT_NE(server_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static json::object PostJson(const std::string& path, const std::string& body) {
    testing::HttpResult result = HttpCall(server_->http_port(), "POST", path, body);
    EXPECT_EQ(result.status, 200) << result.body << result.error;
    EXPECT_EQ(result.content_type, "application/json");
    return json::parse(result.body).as_object();
  }
  // Streams `body` and returns the parsed chunks (the final "[DONE]" checked and dropped).
  static std::vector<json::object> PostStream(const std::string& path, const std::string& body) {
    testing::HttpResult result = HttpCall(server_->http_port(), "POST", path, body);
    EXPECT_EQ(result.status, 200) << result.body << result.error;
    EXPECT_EQ(result.content_type, "text/event-stream");
    std::vector<std::string> events = SseData(result.body);
    EXPECT_FALSE(events.empty());
    std::vector<json::object> chunks;
    if (events.empty()) return chunks;
    EXPECT_EQ(events.back(), "[DONE]");
    for (size_t index = 0; index + 1 < events.size(); ++index) {
      chunks.push_back(json::parse(events[index]).as_object());
    }
    return chunks;
  }
  static std::unique_ptr<Tokenizer> LocalTokenizer() {
    auto file = GgufFile::Open(testing::StoriesPath());
    EXPECT_TRUE(file.ok());
    auto tokenizer = Tokenizer::FromGguf(**file);
    EXPECT_TRUE(tokenizer.ok());
    return std::move(tokenizer).value();
  }

  static ServerProcess* server_;
};
ServerProcess* ServerHttpTest::server_ = nullptr;

TEST_F(ServerHttpTest, HealthAndModels) {
  auto health = HttpCall(server_->http_port(), "GET", "/health");
  ASSERT_EQ(health.status, 200);
  EXPECT_EQ(json::parse(health.body).at("status"), "ok");
  auto models = HttpCall(server_->http_port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  json::object body = json::parse(models.body).as_object();
  EXPECT_EQ(body.at("object"), "list");
  ASSERT_EQ(body.at("data").as_array().size(), 1u);
  const json::object& model = body.at("data").as_array()[0].as_object();
  EXPECT_EQ(model.at("id"), "stories260K");
  EXPECT_EQ(model.at("meta").at("n_vocab"), 512);
  EXPECT_EQ(model.at("meta").at("chat_template"), "plain");
  EXPECT_EQ(model.at("meta").at("device"), "cpu");
  EXPECT_EQ(model.at("meta").at("cache_type_k"), "F16");
  auto metrics = HttpCall(server_->http_port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("sinew_model_device_info{device=\"cpu\",backend=\"cpu-"),
            std::string::npos)
      << metrics.body;
}

TEST_F(ServerHttpTest, GreedyCompletionMatchesTheReferenceEngine) {
  json::object body = PostJson("/v1/completions",
                               R"({"model":"stories260K","prompt":"Once upon a time",
                                   "max_tokens":64,"temperature":0})");
  EXPECT_EQ(body.at("object"), "text_completion");
  const json::object& choice = body.at("choices").as_array()[0].as_object();
  EXPECT_EQ(choice.at("text"), kGreedy64);
  EXPECT_EQ(choice.at("finish_reason"), "length");
  // BOS + the prompt's tokens, as the local tokenizer counts them.
  auto expected_prompt = static_cast<int64_t>(LocalTokenizer()->Encode("Once upon a time").size());
  EXPECT_EQ(body.at("usage").at("prompt_tokens").as_int64(), expected_prompt);
  EXPECT_EQ(body.at("usage").at("completion_tokens").as_int64(), 64);
  EXPECT_EQ(body.at("usage").at("total_tokens").as_int64(), expected_prompt + 64);
}

TEST_F(ServerHttpTest, PromptAsTokenIdsGivesTheSameText) {
  std::vector<int32_t> ids = LocalTokenizer()->Encode("Once upon a time");
  json::array prompt;
  for (int32_t id : ids) prompt.emplace_back(id);
  json::object request;
  request["prompt"] = prompt;
  request["max_tokens"] = 64;
  request["temperature"] = 0;
  json::object body = PostJson("/v1/completions", json::serialize(request));
  EXPECT_EQ(body.at("choices").as_array()[0].at("text"), kGreedy64);
  auto model = HttpCall(server_->http_port(), "GET", "/v1/models/stories260K");
  EXPECT_EQ(model.status, 200);
  EXPECT_EQ(json::parse(model.body).at("id"), "stories260K");
  EXPECT_EQ(HttpCall(server_->http_port(), "GET", "/v1/models/other").status, 404);
  EXPECT_EQ(
      HttpCall(server_->http_port(), "POST", "/v1/completions", R"({"prompt":[1,99999]})").status,
      400);
}

TEST_F(ServerHttpTest, StreamedCompletionIsTheSameText) {
  std::vector<json::object> chunks =
      PostStream("/v1/completions",
                 R"({"prompt":"Once upon a time","max_tokens":64,"temperature":0,"stream":true,
          "stream_options":{"include_usage":true}})");
  ASSERT_GE(chunks.size(), 3u);
  std::string text;
  std::string finish;
  for (const json::object& chunk : chunks) {
    EXPECT_EQ(chunk.at("object"), "text_completion");
    for (const json::value& choice : chunk.at("choices").as_array()) {
      text += std::string(choice.at("text").as_string());
      if (!choice.at("finish_reason").is_null()) finish = choice.at("finish_reason").as_string();
    }
  }
  EXPECT_EQ(text, kGreedy64);
  EXPECT_EQ(finish, "length");
  EXPECT_GT(chunks.size(), 10u) << "text arrives in many events, not one";
  EXPECT_EQ(chunks.back().at("usage").at("completion_tokens"), 64);
}

TEST_F(ServerHttpTest, ChatStreamingAndNotAgree) {
  const std::string request =
      R"({"messages":[{"role":"system","content":"Stories."},{"role":"user","content":"Tell me one"}],
          "max_tokens":24,"temperature":0)";
  json::object whole = PostJson("/v1/chat/completions", request + "}");
  EXPECT_EQ(whole.at("object"), "chat.completion");
  const json::object& choice = whole.at("choices").as_array()[0].as_object();
  EXPECT_EQ(choice.at("message").at("role"), "assistant");
  std::string content(choice.at("message").at("content").as_string());
  EXPECT_FALSE(content.empty());
  // The plain fallback template, tokenized with BOS.
  auto tokenizer = LocalTokenizer();
  auto prompt = tokenizer->Encode("Stories.\n\nUser: Tell me one\nAssistant:");
  EXPECT_EQ(whole.at("usage").at("prompt_tokens").as_int64(), static_cast<int64_t>(prompt.size()));

  std::vector<json::object> chunks =
      PostStream("/v1/chat/completions", request + R"(,"stream":true})");
  ASSERT_GE(chunks.size(), 2u);
  EXPECT_EQ(chunks.front().at("choices").as_array()[0].at("delta").at("role"), "assistant");
  std::string streamed;
  std::string finish;
  for (const json::object& chunk : chunks) {
    EXPECT_EQ(chunk.at("object"), "chat.completion.chunk");
    const json::object& delta = chunk.at("choices").as_array()[0].as_object();
    if (const json::value* text = delta.at("delta").as_object().if_contains("content")) {
      streamed += std::string(text->as_string());
    }
    if (!delta.at("finish_reason").is_null()) finish = delta.at("finish_reason").as_string();
  }
  EXPECT_EQ(streamed, content);
  EXPECT_EQ(finish, choice.at("finish_reason").as_string());
}

TEST_F(ServerHttpTest, StopStringEndsTheTextBeforeIt) {
  json::object body = PostJson("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":64,
                                   "temperature":0,"stop":["Lily"]})");
  const json::object& choice = body.at("choices").as_array()[0].as_object();
  EXPECT_EQ(choice.at("text"), ", there was a little girl named ");
  EXPECT_EQ(choice.at("finish_reason"), "stop");
  EXPECT_LT(body.at("usage").at("completion_tokens").as_int64(), 64);
}

TEST_F(ServerHttpTest, MaxTokensAndSeeds) {
  const std::string request =
      R"({"prompt":"The cat","max_tokens":12,"temperature":0.9,"top_k":40,"top_p":0.95,"seed":1234})";
  json::object first = PostJson("/v1/completions", request);
  json::object second = PostJson("/v1/completions", request);
  EXPECT_EQ(first.at("usage").at("completion_tokens"), 12);
  EXPECT_EQ(first.at("choices").as_array()[0].at("finish_reason"), "length");
  EXPECT_EQ(first.at("choices").as_array()[0].at("text"),
            second.at("choices").as_array()[0].at("text"))
      << "same seed, same text";
}

TEST_F(ServerHttpTest, LogprobsDescribeEveryToken) {
  json::object body = PostJson("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":8,
                                   "temperature":0,"logprobs":2})");
  const json::object& choice = body.at("choices").as_array()[0].as_object();
  const json::object& logprobs = choice.at("logprobs").as_object();
  const json::array& tokens = logprobs.at("tokens").as_array();
  ASSERT_EQ(tokens.size(), 8u);
  std::string joined;
  for (size_t index = 0; index < tokens.size(); ++index) {
    joined += std::string(tokens[index].as_string());
    double logprob = logprobs.at("token_logprobs").as_array()[index].to_number<double>();
    EXPECT_LE(logprob, 0.0);
    const json::object& top = logprobs.at("top_logprobs").as_array()[index].as_object();
    EXPECT_EQ(top.size(), 2u);
    // Greedy picks the most likely token: no alternative beats it.
    for (const auto& alternative : top)
      EXPECT_LE(alternative.value().to_number<double>(), logprob + 1e-6);
  }
  EXPECT_EQ(joined, choice.at("text").as_string());

  json::object chat = PostJson("/v1/chat/completions",
                               R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,
                                   "temperature":0,"logprobs":true,"top_logprobs":1})");
  const json::array& content =
      chat.at("choices").as_array()[0].at("logprobs").at("content").as_array();
  ASSERT_EQ(content.size(), 4u);
  EXPECT_EQ(content[0].at("top_logprobs").as_array().size(), 1u);
  EXPECT_TRUE(content[0].at("bytes").is_array());
}

TEST_F(ServerHttpTest, MetricsCountRequestsAndTokens) {
  auto tokens_counted = [] {
    auto metrics = HttpCall(server_->http_port(), "GET", "/metrics");
    EXPECT_EQ(metrics.status, 200);
    EXPECT_NE(metrics.content_type.find("text/plain"), std::string::npos);
    const std::string key = "\nsinew_model_generated_tokens_total ";
    size_t pos = metrics.body.find(key);
    EXPECT_NE(pos, std::string::npos);
    return std::make_pair(std::stoll(metrics.body.substr(pos + key.size())), metrics.body);
  };
  auto [before, ignored] = tokens_counted();
  json::object body =
      PostJson("/v1/completions", R"({"prompt":"A dog","max_tokens":5,"temperature":0})");
  auto [after, text] = tokens_counted();
  EXPECT_EQ(after - before, body.at("usage").at("completion_tokens").as_int64());
  EXPECT_NE(text.find("sinew_model_requests_total{endpoint=\"/v1/completions\",code=\"200\"}"),
            std::string::npos);
  EXPECT_NE(
      text.find(
          "sinew_model_request_duration_seconds_bucket{endpoint=\"/v1/completions\",le=\"+Inf\"}"),
      std::string::npos);
  EXPECT_NE(text.find("sinew_model_time_to_first_token_seconds_count"), std::string::npos);
}

TEST_F(ServerHttpTest, ConcurrentClientsAllGetTheirAnswer) {
  constexpr int kClients = 4;
  std::vector<std::string> texts(kClients);
  std::vector<long> statuses(kClients);
  std::vector<std::thread> clients;
  for (int index = 0; index < kClients; ++index) {
    clients.emplace_back([&, index] {
      auto result = HttpCall(server_->http_port(), "POST", "/v1/completions",
                             R"({"prompt":"Once upon a time","max_tokens":64,"temperature":0,
                                 "stream":)" +
                                 std::string(index % 2 ? "true" : "false") + "}");
      statuses[index] = result.status;
      if (index % 2) {
        for (const std::string& event : SseData(result.body)) {
          if (event == "[DONE]") continue;
          texts[index] +=
              std::string(json::parse(event).at("choices").as_array()[0].at("text").as_string());
        }
      } else if (result.status == 200) {
        texts[index] = json::parse(result.body).at("choices").as_array()[0].at("text").as_string();
      }
    });
  }
  for (std::thread& client : clients) client.join();
  for (int index = 0; index < kClients; ++index) {
    EXPECT_EQ(statuses[index], 200);
    EXPECT_EQ(texts[index], kGreedy64) << "client " << index;
  }
}

// Frequency and presence penalties reach the sampler (the greedy text changes
// and repeats fewer tokens), and prompt-lookup speculation (--spec-any-rows)
// shows in /metrics when the model retells text from its prompt.
TEST_F(ServerHttpTest, PenaltiesChangeTheTextAndSpeculationShowsInMetrics) {
  auto text_of = [&](const std::string& extra) {
    json::object body = PostJson("/v1/completions",
                                 R"({"prompt":"Once upon a time","max_tokens":64,"temperature":0)" +
                                     extra + "}");
    return std::string(body.at("choices").as_array()[0].at("text").as_string());
  };
  auto distinct_words = [](const std::string& text) {
    std::set<std::string> words;
    std::istringstream in(text);
    for (std::string word; in >> word;) words.insert(word);
    return words.size();
  };
  const std::string plain = text_of("");
  EXPECT_EQ(plain, kGreedy64);
  const std::string penalized = text_of(R"(,"frequency_penalty":1.5,"presence_penalty":1.0)");
  EXPECT_NE(penalized, plain);
  EXPECT_GT(distinct_words(penalized), distinct_words(plain));

  auto metric = [](const std::string& key) -> double {
    std::string body = HttpCall(server_->http_port(), "GET", "/metrics").body;
    size_t pos = body.find("\n" + key + " ");
    return pos == std::string::npos ? -1 : std::stod(body.substr(pos + key.size() + 2));
  };
  const double verifications = metric("sinew_model_spec_verifications_total");
  ASSERT_GE(verifications, 0);
  const std::string retell = std::string(kGreedy64) + "\nOnce upon a time";
  json::object body = PostJson("/v1/completions", json::serialize(json::object{
                                                      {"prompt", retell},
                                                      {"max_tokens", 32},
                                                      {"temperature", 0}}));
  EXPECT_EQ(body.at("usage").at("completion_tokens").as_int64(), 32);
  EXPECT_GT(metric("sinew_model_spec_verifications_total"), verifications);
  EXPECT_GT(metric("sinew_model_spec_accepted_tokens_total"), 0);
  const double acceptance = metric("sinew_model_spec_acceptance_ratio");
  EXPECT_GT(acceptance, 0);
  EXPECT_LE(acceptance, 1);
  EXPECT_GT(metric("sinew_model_spec_tokens_per_verification"), 1);
}

// A client that sends a long non-streaming request and hangs up at once: the server
// notices and cancels the generation (recorded as code 499) instead of running it out.
TEST_F(ServerHttpTest, HangingUpCancelsTheGeneration) {
  auto metric = [](const std::string& key) -> int64_t {
    std::string body = HttpCall(server_->http_port(), "GET", "/metrics").body;
    size_t pos = body.find("\n" + key + " ");
    return pos == std::string::npos ? 0 : std::stoll(body.substr(pos + key.size() + 2));
  };
  const std::string cancelled_key =
      "sinew_model_requests_total{endpoint=\"/v1/completions\",code=\"499\"}";
  int64_t tokens_before = metric("sinew_model_generated_tokens_total");
  ASSERT_EQ(metric(cancelled_key), 0);

  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->http_port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string body = R"({"prompt":"Once upon a time","max_tokens":2000,"temperature":0})";
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  close(fd);

  // Wait (bounded) until the server has recorded the request.
  for (int attempt = 0; attempt < 600 && metric(cancelled_key) == 0; ++attempt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(metric(cancelled_key), 1);
  EXPECT_LT(metric("sinew_model_generated_tokens_total") - tokens_before, 2000);
}

}  // namespace
}  // namespace sinew::model
