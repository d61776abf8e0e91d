// gRPC Generate on the real sinew-model process.
#include <boost/json.hpp>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "server_test_util.h"
#include "sinew/proto/model.grpc.pb.h"

namespace sinew::model {
namespace {

using testing::ServerProcess;

class ServerGrpcTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string error;
    server_ = ServerProcess::Start({}, &error).release();
    ASSERT_NE(server_, nullptr) << error;
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = sinew::v1::ModelService::NewStub(channel);
  }

  // Runs Generate; returns the status and fills the messages.
  grpc::Status Generate(const sinew::v1::GenerateRequest& request,
                        std::vector<sinew::v1::GenerateResponse>& messages) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(5));
    auto reader = stub_->Generate(&context, request);
    for (sinew::v1::GenerateResponse message; reader->Read(&message);) messages.push_back(message);
    return reader->Finish();
  }

  static ServerProcess* server_;
  std::unique_ptr<sinew::v1::ModelService::Stub> stub_;
};
ServerProcess* ServerGrpcTest::server_ = nullptr;

TEST_F(ServerGrpcTest, GreedyStreamMatchesTheReference) {
  sinew::v1::GenerateRequest request;
  request.set_prompt("Once upon a time");
  request.set_max_tokens(64);
  request.set_temperature(0);
  request.set_logprobs(true);
  std::vector<sinew::v1::GenerateResponse> messages;
  grpc::Status status = Generate(request, messages);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GT(messages.size(), 10u);
  std::string text;
  int tokens = 0;
  for (const auto& message : messages) {
    text += message.text();
    tokens += message.token_ids_size();
    EXPECT_EQ(message.logprobs_size(), message.token_ids_size());
  }
  EXPECT_EQ(
      text,
      ", there was a little girl named Lily. She loved to play outside in the park. One "
      "day, she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's "
      "mom said");
  EXPECT_EQ(tokens, 64);
  EXPECT_EQ(messages.back().finish_reason(), "length");
  EXPECT_EQ(messages.back().usage().completion_tokens(), 64u);
  EXPECT_EQ(messages.back().usage().prompt_tokens(), 5u);
}

TEST_F(ServerGrpcTest, ChatAndStop) {
  sinew::v1::GenerateRequest request;
  auto* message = request.add_messages();
  message->set_role("user");
  message->set_content("Tell me a story");
  request.set_max_tokens(16);
  request.set_temperature(0);
  std::vector<sinew::v1::GenerateResponse> messages;
  ASSERT_TRUE(Generate(request, messages).ok());
  ASSERT_FALSE(messages.empty());
  EXPECT_FALSE(messages.back().finish_reason().empty());

  sinew::v1::GenerateRequest stop;
  stop.set_prompt("Once upon a time");
  stop.set_max_tokens(64);
  stop.set_temperature(0);
  stop.add_stop("Lily");
  messages.clear();
  ASSERT_TRUE(Generate(stop, messages).ok());
  std::string text;
  for (const auto& part : messages) text += part.text();
  EXPECT_EQ(text, ", there was a little girl named ");
  EXPECT_EQ(messages.back().finish_reason(), "stop");
}

TEST_F(ServerGrpcTest, BadRequestsAreInvalidArgument) {
  std::vector<sinew::v1::GenerateResponse> messages;
  sinew::v1::GenerateRequest neither;
  EXPECT_EQ(Generate(neither, messages).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  sinew::v1::GenerateRequest unknown;
  unknown.set_prompt("x");
  unknown.set_model("gpt-4");
  grpc::Status status = Generate(unknown, messages);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("gpt-4"), std::string::npos);
  sinew::v1::GenerateRequest hot;
  hot.set_prompt("x");
  hot.set_temperature(9);
  EXPECT_EQ(Generate(hot, messages).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  sinew::v1::GenerateRequest too_long;
  too_long.set_prompt("x");
  too_long.set_max_tokens(1 << 20);
  EXPECT_EQ(Generate(too_long, messages).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  for (float bad : {2.5f, -3.0f}) {
    sinew::v1::GenerateRequest penalty;
    penalty.set_prompt("x");
    penalty.set_frequency_penalty(bad);
    status = Generate(penalty, messages);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("frequency_penalty"), std::string::npos) << status.error_message();
    penalty.clear_frequency_penalty();
    penalty.set_presence_penalty(bad);
    status = Generate(penalty, messages);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(status.error_message().find("presence_penalty"), std::string::npos) << status.error_message();
  }
  EXPECT_TRUE(messages.empty());
}

// Frequency and presence penalties over gRPC give the text the HTTP API gives for them
// (whose penalties are checked against a double-precision reference), and they change it.
TEST_F(ServerGrpcTest, PenaltiesMatchTheHttpApi) {
  sinew::v1::GenerateRequest request;
  request.set_prompt("Once upon a time");
  request.set_max_tokens(48);
  request.set_temperature(0);
  std::vector<sinew::v1::GenerateResponse> messages;
  ASSERT_TRUE(Generate(request, messages).ok());
  std::string plain;
  for (const auto& m : messages) plain += m.text();
  request.set_frequency_penalty(1.5f);
  request.set_presence_penalty(0.5f);
  messages.clear();
  ASSERT_TRUE(Generate(request, messages).ok());
  std::string penalised;
  for (const auto& m : messages) penalised += m.text();
  EXPECT_NE(penalised, plain);
  auto http = testing::HttpCall(server_->http_port(), "POST", "/v1/completions",
                                R"({"prompt": "Once upon a time", "max_tokens": 48, "temperature": 0,
                                    "frequency_penalty": 1.5, "presence_penalty": 0.5})");
  ASSERT_EQ(http.status, 200) << http.body;
  auto body = boost::json::parse(http.body);
  EXPECT_EQ(std::string(body.at("choices").at(0).at("text").as_string()), penalised);
}

}  // namespace
}  // namespace sinew::model
