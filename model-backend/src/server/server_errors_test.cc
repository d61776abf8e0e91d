// Every error path of the real sinew-model process: each bad request gets a 4xx with a
// JSON error body, and the server keeps serving afterwards.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <random>

#include "server_test_util.h"

namespace sinew::model {
namespace {

namespace json = boost::json;
using testing::HttpCall;
using testing::ServerProcess;

class ServerErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    // A small context and body limit and a short read timeout, to reach those limits.
    server_ = ServerProcess::Start(
                  {"--ctx", "64", "--max-body-bytes", "65536", "--read-timeout", "1"}, &error)
                  .release();
    ASSERT_NE(server_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_NE(server_, nullptr); }
  void TearDown() override {
    // Whatever was sent, the server is still up and answering.
    ASSERT_TRUE(server_->Alive());
    EXPECT_EQ(HttpCall(server_->http_port(), "GET", "/health").status, 200);
  }

  // Sends the request and checks the status and the error body; returns error.code.
  static std::string ExpectError(long status, const std::string& method, const std::string& path,
                                 const std::string& body,
                                 const std::string& content_type = "application/json") {
    testing::HttpResult result = HttpCall(server_->http_port(), method, path, body, content_type);
    EXPECT_EQ(result.status, status)
        << body.substr(0, 200) << " -> " << result.body << result.error;
    EXPECT_EQ(result.content_type, "application/json");
    boost::system::error_code ec;
    json::value parsed = json::parse(result.body, ec);
    EXPECT_FALSE(ec) << result.body;
    if (ec || !parsed.is_object() || !parsed.as_object().contains("error")) return "";
    const json::object& error = parsed.at("error").as_object();
    EXPECT_FALSE(error.at("message").as_string().empty());
    EXPECT_FALSE(error.at("type").as_string().empty());
    return std::string(error.at("code").as_string());
  }

  static ServerProcess* server_;
};
ServerProcess* ServerErrorsTest::server_ = nullptr;

TEST_F(ServerErrorsTest, MalformedJson) {
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", R"({"prompt": "x",)"), "invalid_json");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/chat/completions", "not json at all"), "invalid_json");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", std::string(100, '[')), "invalid_json");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", "[1,2,3]"), "invalid_parameter");
}

TEST_F(ServerErrorsTest, WrongContentType) {
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", R"({"prompt":"x"})", "text/plain"),
            "unsupported_media_type");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", R"({"prompt":"x"})", ""),
            "unsupported_media_type");
}

TEST_F(ServerErrorsTest, UnknownModel) {
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", R"({"model":"gpt-4","prompt":"x"})"),
            "model_not_found");
}

TEST_F(ServerErrorsTest, InvalidParameters) {
  for (const char* body : {R"({"prompt":"x","temperature":5})", R"({"prompt":"x","top_p":-1})",
                           R"({"prompt":"x","max_tokens":0})",
                           R"({"prompt":"x","max_tokens":"ten"})", R"({"prompt":"x","top_k":1.5})",
                           R"({"prompt":"x","stream":1})", R"({"prompt":"x","stop":[1]})",
                           R"({"prompt":"x","logprobs":99})", R"({"temperature":0})"}) {
    EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", body), "invalid_parameter") << body;
  }
  EXPECT_EQ(ExpectError(400, "POST", "/v1/chat/completions", R"({"messages":"hi"})"),
            "invalid_parameter");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/chat/completions",
                        R"({"messages":[{"role":"wizard","content":"hi"}]})"),
            "invalid_parameter");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", R"({"prompt":"x","n":3})"),
            "invalid_parameter");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", R"({"prompt":"x","presence_penalty":3})"),
            "invalid_parameter");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions",
                        R"({"prompt":"x","frequency_penalty":"lots"})"),
            "invalid_parameter");
}

TEST_F(ServerErrorsTest, ContextOverflow) {
  // The server runs with a 64-token context.
  std::string long_prompt;
  for (int index = 0; index < 80; ++index) long_prompt += "the cat sat. ";
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions", R"({"prompt":")" + long_prompt + R"("})"),
            "context_length_exceeded");
  EXPECT_EQ(ExpectError(400, "POST", "/v1/completions",
                        R"({"prompt":"Once","max_tokens":100,"stream":true})"),
            "context_length_exceeded");
  // Far longer than the context could hold: refused by its size before it is tokenized
  // (tokenizing 200k-token prompts first had grown the server by ~800 MB).
  const std::string huge(60000, 'a');
  auto refused = HttpCall(server_->http_port(), "POST", "/v1/completions", R"({"prompt":")" + huge + R"("})");
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("refused before tokenizing"), std::string::npos) << refused.body;
  EXPECT_NE(refused.body.find("context_length_exceeded"), std::string::npos) << refused.body;
  // Without max_tokens the generation fits itself into the context.
  auto fits = HttpCall(server_->http_port(), "POST", "/v1/chat/completions",
                       R"({"messages":[{"role":"user","content":"Hi"}],"temperature":0})");
  EXPECT_EQ(fits.status, 200) << fits.body;
}

TEST_F(ServerErrorsTest, OversizedBody) {
  std::string huge = R"({"prompt":")" + std::string(70000, 'a') + R"("})";
  EXPECT_EQ(ExpectError(413, "POST", "/v1/completions", huge), "payload_too_large");
}

TEST_F(ServerErrorsTest, UnknownPathsAndMethods) {
  EXPECT_EQ(ExpectError(404, "GET", "/v1/nothing", ""), "not_found");
  EXPECT_EQ(ExpectError(405, "GET", "/v1/completions", ""), "method_not_allowed");
  EXPECT_EQ(ExpectError(405, "POST", "/health", "{}"), "method_not_allowed");
}

TEST_F(ServerErrorsTest, SlowClientIsCutOffByTheReadTimeout) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->http_port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string partial = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n";
  ASSERT_EQ(send(fd, partial.data(), partial.size(), 0), static_cast<ssize_t>(partial.size()));
  // The headers never finish: the server closes the connection (recv returns 0 or an error).
  char buffer[256];
  ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
  EXPECT_LE(n, 0);
  close(fd);
}

TEST_F(ServerErrorsTest, ClientLeavingMidStream) {
  // Reads the first bytes of a long stream, then hangs up.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->http_port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string body = R"({"prompt":"Once","stream":true,"temperature":0.8})";
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  char buffer[64];
  EXPECT_GT(recv(fd, buffer, sizeof(buffer), 0), 0);
  close(fd);
  // TearDown checks that the server still answers.
}

// Mutated copies of valid requests (bytes flipped, inserted, dropped, truncated): each
// answer is a 200 with a completion or a 400 with an error body, never anything else.
TEST_F(ServerErrorsTest, MutatedBodiesGetAnAnswerOrAnError) {
  const std::vector<std::string> seeds = {
      R"({"prompt":"Once upon a time","max_tokens":4,"temperature":0.5,"stop":["x"],"seed":3})",
      R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"logprobs":true,"top_logprobs":2})",
  };
  std::mt19937 rng(7);
  using namespace std::string_literals;
  const std::string alphabet = "{}[]\":,0123456789-.eE truefalsenull\\\x00\xff\xc3"s;
  for (int round = 0; round < 150; ++round) {
    bool chat = round % 2 == 1;
    std::string body = seeds[round % 2];
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int edit = 0; edit < edits && !body.empty(); ++edit) {
      size_t pos = rng() % body.size();
      switch (rng() % 4) {
        case 0:
          body[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        case 2:
          body.erase(pos, 1 + rng() % 8);
          break;
        default:
          body.resize(pos);
          break;
      }
    }
    testing::HttpResult result = HttpCall(server_->http_port(), "POST",
                                          chat ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_TRUE(result.status == 200 || result.status == 400) << body << " -> " << result.status;
    boost::system::error_code ec;
    json::value parsed = json::parse(result.body, ec);
    ASSERT_FALSE(ec) << body << " -> " << result.body;
    EXPECT_TRUE(parsed.as_object().contains(result.status == 200 ? "choices" : "error"))
        << result.body;
  }
}

TEST_F(ServerErrorsTest, GarbageOnTheWire) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server_->http_port());
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string garbage = "\x01\x02 NOT HTTP \xff\xfe\r\n\r\n";
  ASSERT_EQ(send(fd, garbage.data(), garbage.size(), 0), static_cast<ssize_t>(garbage.size()));
  std::string reply;
  char buffer[1024];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;)
    reply.append(buffer, static_cast<size_t>(n));
  close(fd);
  EXPECT_TRUE(reply.starts_with("HTTP/1.1 400")) << reply;
  EXPECT_NE(reply.find("\"bad_request\""), std::string::npos) << reply;
}

}  // namespace
}  // namespace sinew::model
