// gRPC implementation of SandboxClient.
#include "sinew/sandbox/sandbox_client.h"

#include <grpcpp/grpcpp.h>

#include "sinew/grpc_status.h"
#include "sinew/proto/sandbox.grpc.pb.h"

namespace sinew::sandbox {
namespace {

constexpr int kMaxMessageBytes = 64 << 20;

class GrpcSandboxClient final : public SandboxClient {
 public:
  GrpcSandboxClient(std::shared_ptr<grpc::Channel> channel, SandboxClientOptions options)
      : channel_(std::move(channel)), stub_(v1::Sandbox::NewStub(channel_)), options_(options) {}

  Result<v1::ExecuteResult> Execute(std::string_view name, std::string_view input_json) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    v1::ExecuteRequest req = MakeRequest(name, input_json);
    v1::ExecuteResult result;
    grpc::Status s = stub_->Execute(&ctx, req, &result);
    if (!s.ok()) return FromGrpcStatus(s).WithContext("sandbox Execute");
    return result;
  }

  Result<v1::ExecuteResult> ExecuteStream(std::string_view name, std::string_view input_json,
                                          const OutputCallback& on_output) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.call_timeout);
    v1::ExecuteRequest req = MakeRequest(name, input_json);
    auto reader = stub_->ExecuteStream(&ctx, req);
    v1::ExecuteChunk chunk;
    std::optional<v1::ExecuteResult> result;
    while (reader->Read(&chunk)) {
      switch (chunk.kind_case()) {
        case v1::ExecuteChunk::kStdoutBytes:
          if (on_output) on_output(false, chunk.stdout_bytes());
          break;
        case v1::ExecuteChunk::kStderrBytes:
          if (on_output) on_output(true, chunk.stderr_bytes());
          break;
        case v1::ExecuteChunk::kResult:
          result = std::move(*chunk.mutable_result());
          break;
        case v1::ExecuteChunk::KIND_NOT_SET:
          break;
      }
    }
    grpc::Status s = reader->Finish();
    if (!s.ok()) return FromGrpcStatus(s).WithContext("sandbox ExecuteStream");
    if (!result) return Status::Internal("sandbox ExecuteStream ended without a result");
    return *std::move(result);
  }

  Result<std::vector<v1::ToolSpec>> ListTools() override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + options_.connect_timeout);
    v1::ListToolsResponse resp;
    grpc::Status s = stub_->ListTools(&ctx, v1::ListToolsRequest(), &resp);
    if (!s.ok()) return FromGrpcStatus(s).WithContext("sandbox ListTools");
    return std::vector<v1::ToolSpec>(resp.tools().begin(), resp.tools().end());
  }

 private:
  static v1::ExecuteRequest MakeRequest(std::string_view name, std::string_view input_json) {
    v1::ExecuteRequest req;
    req.set_name(std::string(name));
    req.set_input_json(std::string(input_json));
    return req;
  }

  // Constant after construction.
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Sandbox::Stub> stub_;
  SandboxClientOptions options_;
};

}  // namespace

Result<std::unique_ptr<SandboxClient>> SandboxClient::Connect(std::string endpoint,
                                                              SandboxClientOptions options) {
  if (endpoint.empty()) return Status::InvalidArgument("sandbox endpoint is empty");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  auto channel = grpc::CreateCustomChannel(endpoint, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + options.connect_timeout)) {
    return Status::Unavailable("sandbox agent at " + endpoint + " did not answer within " +
                               std::to_string(options.connect_timeout.count()) + " ms");
  }
  return std::unique_ptr<SandboxClient>(new GrpcSandboxClient(std::move(channel), options));
}

}  // namespace sinew::sandbox
